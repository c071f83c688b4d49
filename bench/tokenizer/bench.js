#!/usr/bin/env node
// bench.js - tokterm's tokenizer vs tiktoken (WASM) and gpt-tokenizer (JS); run by run.sh.
//   node bench.js TOKBENCH WORKDIR
// Builds a 10 MB mixed corpus in WORKDIR (deterministic), times all three on it for o200k_base
// and cl100k_base, checks that the ids are identical, then times runs of one character and the
// table load. Prints a Markdown report.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { get_encoding } = require('tiktoken');

const tokbench = process.argv[2];
const workdir = process.argv[3];
const REPS = Number(process.env.BENCH_REPS || 3);
fs.mkdirSync(workdir, { recursive: true });

// ---- corpus ----
let seed = 7;
function rnd() {
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const zipf = (a) => a[Math.min(a.length - 1, Math.floor(a.length * Math.pow(rnd(), 2.5)))];

const WORDS = ('the of and to a in is it you that he was for on are with as I his they be at one ' +
    'have this from or had by hot word but what some we can out other were all there when up use ' +
    'your how said an each she which do their time if will way about many then them write would ' +
    'like so these her long make thing see him two has look more day could go come did number ' +
    'sound no most people my over know water than call first who may down side been now find any ' +
    'new work part take get place made live where after back little only round man year came show ' +
    'every good me give our under name very through just form sentence great think say help low ' +
    'line differ turn cause much mean before move right boy old too same tell does set three want ' +
    'air well also play small end put home read hand port large spell add even land here must big ' +
    'high such follow act why ask men change went light kind off need house picture try us again ' +
    'animal point mother world near build self earth father head stand own page should country ' +
    'found answer school grow study still learn plant cover food sun four between state keep eye ' +
    'never last let thought city tree cross farm hard start might story saw far sea draw left late ' +
    'run while press close night real life few north open seem together next white children begin ' +
    'got walk example ease paper group always music those both mark often letter until mile river ' +
    'car feet care second book carry took science eat room friend began idea fish mountain stop ' +
    'once base hear horse cut sure watch color face wood main enough plain girl usual young ready ' +
    'above ever red list though feel talk bird soon body dog family direct pose leave song measure ' +
    'door product black short numeral class wind question happen complete ship area half rock order ' +
    'fire south problem piece told knew pass since top whole king space heard best hour better true ' +
    'during hundred five remember step early hold west ground interest reach fast verb sing listen ' +
    'tokenizer streaming latency throughput context window prompt completion gradient embedding').split(' ');
const CONTRACTIONS = ["don't", "it's", "I'm", "we're", "they've", "you'll", "she'd", "can't", "isn't", "DON'T"];
const NAMES = ['Alice', 'Bob', 'OpenAI', 'London', 'Tuesday', 'GitHub', 'NASA', 'McDonald', 'iPhone'];

function prose(bytes) {
    let s = '';
    while (s.length < bytes) {
        const n = 5 + Math.floor(rnd() * 20);
        const w = [];
        for (let i = 0; i < n; i++) {
            const r = rnd();
            if (r < 0.05) w.push(pick(CONTRACTIONS));
            else if (r < 0.09) w.push(pick(NAMES));
            else if (r < 0.12) w.push(String(Math.floor(rnd() * (rnd() < 0.5 ? 100 : 1e6))));
            else w.push(zipf(WORDS));
            if (rnd() < 0.08 && i < n - 1) w[w.length - 1] += pick([',', ';', ':', ' --']);
        }
        w[0] = w[0][0].toUpperCase() + w[0].slice(1);
        let sent = w.join(' ') + pick(['.', '.', '.', '!', '?', '...']);
        if (rnd() < 0.1) sent = '"' + sent + '"';
        s += sent + (rnd() < 0.15 ? '\n\n' : ' ');
    }
    return s;
}

const IDENT = ['buf', 'len', 'count', 'node', 'next', 'value', 'result', 'index', 'ctx', 'tok', 'i', 'j',
               'err', 'data', 'size', 'offset', 'cache', 'items', 'config', 'handler', 'request', 'user'];
const ident = () => pick(IDENT) + (rnd() < 0.4 ? pick(['_', '']) + pick(IDENT).replace(/^./, (c) => (rnd() < 0.5 ? c.toUpperCase() : c)) : '');

function code(bytes) {
    const tmpl = [
        () => `static int ${ident()}(struct ${ident()} *${ident()}, size_t ${ident()})\n{\n    if (!${ident()})\n        return -1;\n    for (size_t i = 0; i < ${ident()}; i++)\n        ${ident()}[i] = ${ident()}->${ident()}[i] * ${Math.floor(rnd() * 1000)};\n    return 0;\n}\n\n`,
        () => `def ${ident()}(${ident()}, ${ident()}=None):\n    """Return the ${zipf(WORDS)} of ${zipf(WORDS)}."""\n    if ${ident()} is None:\n        ${ident()} = {}\n    return [${ident()}.get(k, ${Math.floor(rnd() * 100)}) for k in ${ident()}]\n\n`,
        () => `export const ${ident()} = async (${ident()}) => {\n  const ${ident()} = await fetch(\`/api/v1/${ident()}?id=\${${ident()}}\`);\n  if (!${ident()}.ok) throw new Error("HTTP " + ${ident()}.status);\n  return ${ident()}.json();\n};\n\n`,
        () => `{"${ident()}": ${Math.floor(rnd() * 1e5)}, "${ident()}": "${zipf(WORDS)} ${zipf(WORDS)}", "${ident()}": [${Math.floor(rnd() * 10)}, ${rnd().toFixed(4)}, true, null]}\n`,
        () => `<div class="${ident()}"><a href="https://example.com/${ident()}/${Math.floor(rnd() * 999)}">${zipf(WORDS)}</a></div>\n`,
    ];
    let s = '';
    while (s.length < bytes) s += pick(tmpl)();
    return s;
}

const CJK = Array.from('的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从知全点现化那些本动两理长机水高实百新些明民正合形样问力命利间社体产任如' +
                  'あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノ한국어세종대왕안녕하세요만나서반갑습니다');
function cjk(bytes) {
    let s = '';
    while (Buffer.byteLength(s) < bytes) {
        const n = 4 + Math.floor(rnd() * 30);
        for (let i = 0; i < n; i++) s += pick(CJK);
        s += pick(['，', '。', '、', '！', '？', '：', '\n', ' ']);
        if (rnd() < 0.05) s += 'GPT-4o ' + Math.floor(rnd() * 1000) + ' ';
    }
    return s;
}

const EMOJI = ['😀', '😂', '👍', '👍🏽', '🔥', '❤️', '✨', '🎉', '👨‍👩‍👧‍👦', '🧑‍💻', '🇺🇸', '🇯🇵', '🏳️‍🌈', '#️⃣', '🤖', '🚀'];
function emoji(bytes) {
    let s = '';
    while (Buffer.byteLength(s) < bytes) {
        s += zipf(WORDS) + ' ';
        if (rnd() < 0.5) s += pick(EMOJI) + (rnd() < 0.3 ? pick(EMOJI) : '') + ' ';
        if (rnd() < 0.1) s += '\n';
    }
    return s;
}

const OTHER = ['Съешь же ещё этих мягких французских булок, да выпей чаю. ', 'مرحبا بالعالم، كيف حالك اليوم؟ ',
               'नमस्ते दुनिया, आप कैसे हैं? ', 'Ελληνικά: γειά σου κόσμε. ', 'Ünïcödé façade naïve café résumé. ',
               'עברית: שלום עולם. ', 'ภาษาไทย สวัสดีชาวโลก ', 'Tiếng Việt: xin chào thế giới. '];
function other(bytes) {
    let s = '';
    while (Buffer.byteLength(s) < bytes) s += pick(OTHER) + (rnd() < 0.2 ? '\n' : '');
    return s;
}

function runs(bytes) {
    let s = '';
    while (s.length < bytes) {
        s += pick(['=', '-', ' ', '#', '*', '\n', '0', 'a', '.', '~', '\t']).repeat(50 + Math.floor(rnd() * 1950));
        s += '\n' + zipf(WORDS) + '\n';
    }
    return s;
}

function buildCorpus(file) {
    const MB = 1 << 20;
    const parts = [
        [0.40, prose], [0.25, code], [0.10, cjk], [0.07, emoji], [0.10, other], [0.08, runs],
    ];
    const chunks = [];
    // interleave 64 kB blocks of each kind so the mix is even throughout
    const want = parts.map(([f]) => f * 10 * MB);
    const have = parts.map(() => 0);
    let total = 0;
    while (total < 10 * MB) {
        for (let k = 0; k < parts.length; k++) {
            if (have[k] >= want[k]) continue;
            const b = Buffer.from(parts[k][1](Math.min(65536, want[k] - have[k])), 'utf8');
            chunks.push(b);
            have[k] += b.length;
            total += b.length;
        }
    }
    fs.writeFileSync(file, Buffer.concat(chunks));
}

// ---- timing ----
function timeBest(fn) {
    let best = Infinity, out;
    for (let r = 0; r < REPS; r++) {
        const t0 = process.hrtime.bigint();
        out = fn();
        const dt = Number(process.hrtime.bigint() - t0) / 1e9;
        best = Math.min(best, dt);
    }
    return { s: best, out };
}

function kv(line) {
    return Object.fromEntries(line.trim().split(/\s+/).map((x) => x.split('=')));
}

const corpus = path.join(workdir, 'corpus10mb.txt');
if (!fs.existsSync(corpus)) buildCorpus(corpus);
const text = fs.readFileSync(corpus, 'utf8');
const bytes = Buffer.byteLength(text);
const MBs = (s) => (bytes / s / 1e6).toFixed(2);

const lines = [];
const log = (s) => { lines.push(s); console.log(s); };
log(`# tokenizer benchmark\n`);
log(`corpus: ${(bytes / 1e6).toFixed(2)} MB mixed (40% prose, 25% code, 10% CJK, 7% emoji, 10% other scripts, 8% runs of one character up to 2000); best of ${REPS}; ${new Date().toISOString().slice(0, 10)}; node ${process.version}\n`);
log('| encoding | tokens | tokterm encode MB/s | tokterm count MB/s | tiktoken MB/s | gpt-tokenizer MB/s | gpt-tokenizer warm cache MB/s | tokterm vs faster JS | ids identical |');
log('|---|---|---|---|---|---|---|---|---|');
let allSame = true;
for (const enc of ['o200k_base', 'cl100k_base']) {
    const ours = kv(execFileSync(tokbench, ['speed', enc, corpus, String(REPS)]).toString());
    const oursIds = execFileSync(tokbench, ['ids', enc, corpus], { maxBuffer: 1 << 30 }).toString().trim();
    const tk = get_encoding(enc);
    const a = timeBest(() => tk.encode_ordinary(text));
    const g = require(`gpt-tokenizer/cjs/encoding/${enc}`);
    g.encode('warm up');
    const none = new Set();
    // gpt-tokenizer keeps a merge cache across calls; clear it so that every timed call starts
    // cold like tokterm's and tiktoken's, and report the warm (same text again) speed apart
    const b = timeBest(() => {
        g.clearMergeCache();
        return g.encode(text, { disallowedSpecial: none });
    });
    const bw = timeBest(() => g.encode(text, { disallowedSpecial: none }));
    const tkIds = Array.from(a.out).join(' ');
    const same = tkIds === oursIds && tkIds === b.out.join(' ') && tkIds === bw.out.join(' ');
    allSame = allSame && same;
    const ourS = Number(ours.encode_s);
    const fasterJs = Math.min(a.s, b.s);
    log(`| ${enc} | ${a.out.length} | ${MBs(ourS)} | ${MBs(Number(ours.count_s))} | ${MBs(a.s)} | ${MBs(b.s)} | ${MBs(bw.s)} | ${(fasterJs / ourS).toFixed(1)}x | ${same ? 'yes' : 'NO'} |`);
    tk.free();
}

log('\n## runs of one character (no quadratic slow-down)\n');
log('| encoding | char | bytes | tokterm s | tiktoken s | gpt-tokenizer s |');
log('|---|---|---|---|---|---|');
const JS_RUN = Number(process.env.BENCH_JS_RUN || 30000);
for (const enc of ['o200k_base', 'cl100k_base']) {
    const tk = get_encoding(enc);
    const g = require(`gpt-tokenizer/cjs/encoding/${enc}`);
    for (const ch of ['a', ' ', '!']) {
        const show = JSON.stringify(ch);
        for (const n of [JS_RUN, 1000000]) {
            const r = kv(execFileSync(tokbench, ['run', enc, ch, String(n)]).toString());
            let js1 = '(not run: quadratic)', js2 = js1;
            if (n <= JS_RUN) {
                const s = ch.repeat(n);
                let t0 = process.hrtime.bigint();
                const x = tk.encode_ordinary(s);
                js1 = (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(3);
                g.clearMergeCache();
                t0 = process.hrtime.bigint();
                const y = g.encode(s);
                js2 = (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(3);
                if (x.length !== Number(r.tokens) || y.length !== Number(r.tokens)) {
                    js1 += ' (count differs!)';
                    allSame = false;
                }
            }
            log(`| ${enc} | ${show} | ${n} | ${Number(r.seconds).toFixed(3)} | ${js1} | ${js2} |`);
        }
    }
    tk.free();
}

// A message longer than a sixth of the budget is shortened for every request that holds it
// (context_shorten: its first and last ids, a marker between): its ends alone are merged, the
// pieces between only found. The first 1 MB of the corpus, keep 6,800 ids (a 128k model's).
log('\n## a long message shortened for a request (its first and last 3,400 ids of 1 MB)\n');
log('| encoding | tokens | tokterm, encoded whole ms | tokterm, its ends ms | tiktoken, encoded whole ms | whole / ends | ids identical |');
log('|---|---|---|---|---|---|---|');
const MB1 = Buffer.from(text).subarray(0, 1000000).toString('utf8').replace(/\uFFFD+$/, '');
for (const enc of ['o200k_base', 'cl100k_base']) {
    const r = kv(execFileSync(tokbench, ['ends', enc, corpus, '1000000', '6800', String(Math.max(REPS, 5))]).toString());
    const tk = get_encoding(enc);
    const a = timeBest(() => tk.encode_ordinary(MB1));
    const same = r.same === '1';
    allSame = allSame && same;
    log(`| ${enc} | ${r.tokens} | ${Number(r.whole_ms).toFixed(2)} | ${Number(r.ends_ms).toFixed(2)} | ${(a.s * 1e3).toFixed(2)} | ${(Number(r.whole_ms) / Number(r.ends_ms)).toFixed(1)}x | ${same ? 'yes' : 'NO'} |`);
    tk.free();
}

log('\n## table load (tokenizer_open + first lookup)\n');
log('| encoding | first open in a fresh process, median of 9 (ms) | later opens, best / mean of 50 (ms) |');
log('|---|---|---|');
for (const enc of ['o200k_base', 'cl100k_base']) {
    const firsts = [];
    for (let i = 0; i < 9; i++)
        firsts.push(Number(kv(execFileSync(tokbench, ['load', enc, '1']).toString()).load_best_ms));
    firsts.sort((x, y) => x - y);
    const many = kv(execFileSync(tokbench, ['load', enc, '50']).toString());
    log(`| ${enc} | ${firsts[4].toFixed(2)} | ${Number(many.load_best_ms).toFixed(3)} / ${Number(many.load_mean_ms).toFixed(3)} |`);
}
log(`\nids identical everywhere: ${allSame ? 'yes' : 'NO'}`);
fs.writeFileSync(path.join(workdir, 'report.md'), lines.join('\n') + '\n');
process.exit(allSame ? 0 : 1);
