#!/usr/bin/env node
// diff-tokenizer.js - differential fuzzing of tokterm's tokenizer against the tiktoken npm package.
//
//   NODE_PATH=/tmp/npmwork/node_modules node tools/diff-tokenizer.js TOKBENCH [ITERS] [SEED]
//
// TOKBENCH is the built bench/tokenizer/tokbench. Each iteration writes a few thousand random
// texts (weighted toward the character classes the pre-tokenizer regexes care about, plus random
// code points from all planes and raw invalid UTF-8 bytes) and compares the ids for o200k_base
// and cl100k_base. A mismatch is shrunk to a small failing text and printed.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { get_encoding } = require('tiktoken');

const tokbench = process.argv[2];
const iters = Number(process.argv[3] || 5);
let seed = Number(process.argv[4] || 12345) >>> 0;
if (!tokbench) {
    console.error('usage: diff-tokenizer.js TOKBENCH [ITERS] [SEED]');
    process.exit(2);
}

function rnd() { // xorshift32
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const cp = (c) => String.fromCodePoint(c);

const GROUPS = [
    [8, 'abcdefghijklmnopqrstuvwxyz'], [5, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'], [6, ' '],
    [3, '0123456789'], [3, "'"], [2, 'sStTmMdDrReEvVlL'], [2, '\n\r\t'], [2, '/'],
    [3, '.,;:!?-_()[]{}<>"#$%&*+=@\\^`|~'],
    [1, '\u00a0\u3000\u2028\u2029\u1680\u0085\u000b\u000c\u001c\u001f\u180e\u200b\ufeff\u2000\u200a\u202f\u205f'],
    [1, '\u017f\u212a\u0130\u0131\u01c5\u01c8\u1e9e\u00df'], // long s, Kelvin, dotted I, Lt, sharp s
    [2, '\u0300\u0301\u0308\u0327\u064b\u093e\u094d\u0951\u20dd\ufe0f\ufe0e\u200d\u0903\u0982'],
    [2, '\u02b0\u02c6\u3005\u3031\uff70\u1d2c'], // Lm
    [3, 'éàüñçøåÉÀÜÑÇØÅ'], [3, 'абвгдежзАБВГДЕЖЗ'], [3, 'αβγδεΑΒΓΔΕ'],
    [3, '日本語中文字漢字かなカナひらがな한국어'], [2, 'العربيةمرحبا'], [2, 'हिन्दीनमस्ते'],
    [2, '٠١٢٣٤٥٦٧٨٩²³¹¼½Ⅻⅻ⑩०१२'],
    [2, ['😀', '👍', '🏽', '👨‍👩‍👧', '🇺🇸', '🇩🇪', '❤️', '✨', '🧑‍💻', '#️⃣']],
    [1, ['𝐀', '𝐚', '𝔸', '𠀀', '𐐀', '𐐨', '𝟘', '𑁦', '𖿠', '\u{e0041}', '\u{1f3fb}']],
];
const TOTAL = GROUPS.reduce((a, g) => a + g[0], 0);

function randomCodePoint() {
    for (;;) {
        const r = rnd();
        let c;
        if (r < 0.6) c = Math.floor(rnd() * 0x10000);
        else if (r < 0.9) c = 0x10000 + Math.floor(rnd() * 0x20000);
        else c = 0xe0000 + Math.floor(rnd() * 0x200);
        if (c === 0 || (c >= 0xd800 && c <= 0xdfff)) continue;
        return cp(c);
    }
}

// A long piece for the heap-based merge (pieces over 64 bytes): a repeated short pattern, or
// letters / CJK / digits / punctuation drawn from a small alphabet.
function longSegment() {
    const len = 65 + Math.floor(rnd() * (rnd() < 0.9 ? 400 : 5000));
    const r = rnd();
    if (r < 0.3) {
        let pat = '';
        for (let k = 1 + Math.floor(rnd() * 4); k > 0; k--) pat += pick(Array.from('abcAB!= .日本'));
        return pat.repeat(Math.ceil(len / pat.length)).slice(0, len);
    }
    const alpha = Array.from(pick(['abcdefg', 'aaab', 'xyzXYZ', '日本語中文字', 'あいうえおアイウ', '!=-#',
                                   'éèêëe', 'абвгд', 'ab\u0301c\u0308', '0123']));
    let s = '';
    while (s.length < len) s += pick(alpha);
    return s;
}

function randomText() {
    const n = 1 + Math.floor(rnd() * 24);
    let s = '';
    for (let i = 0; i < n; i++) {
        if (rnd() < 0.03) { s += longSegment(); continue; }
        if (rnd() < 0.06) { s += randomCodePoint(); continue; }
        let r = rnd() * TOTAL, g = GROUPS[0];
        for (const x of GROUPS) { if ((r -= x[0]) < 0) { g = x; break; } }
        const chars = typeof g[1] === 'string' ? Array.from(g[1]) : g[1];
        const run = rnd() < 0.2 ? 1 + Math.floor(rnd() * 12) : 1 + Math.floor(rnd() * 3);
        for (let k = 0; k < run; k++) s += pick(chars);
    }
    return s;
}

function randomBytes() { // invalid UTF-8 mixed with valid text, no NUL
    const parts = [];
    const n = 1 + Math.floor(rnd() * 10);
    for (let i = 0; i < n; i++) {
        if (rnd() < 0.5) parts.push(Buffer.from(randomText(), 'utf8'));
        else {
            const k = 1 + Math.floor(rnd() * 4), b = [];
            for (let j = 0; j < k; j++) b.push(1 + Math.floor(rnd() * 255));
            if (rnd() < 0.5) b[0] = pick([0xc0, 0xc1, 0xc2, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x80]);
            parts.push(Buffer.from(b));
        }
    }
    return Buffer.concat(parts);
}

const encs = Object.fromEntries(['o200k_base', 'cl100k_base'].map((e) => [e, get_encoding(e)]));
const dec = new TextDecoder('utf-8', { ignoreBOM: true });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tokdiff-'));

function ours(enc, bufs) {
    const f = path.join(tmp, 'in.bin');
    const sep = Buffer.from([0]);
    fs.writeFileSync(f, Buffer.concat(bufs.flatMap((b, i) => (i ? [sep, b] : [b]))));
    const out = execFileSync(tokbench, ['idsz', enc, f], { maxBuffer: 1 << 30 }).toString();
    return out.split('\n').slice(0, bufs.length);
}
const theirs = (enc, b) => Array.from(encs[enc].encode_ordinary(dec.decode(b))).join(' ');

function shrink(enc, b) {
    let cur = b;
    for (let changed = true; changed;) {
        changed = false;
        for (let len = Math.max(1, cur.length >> 1); len >= 1; len >>= 1) {
            for (let i = 0; i + len <= cur.length; i++) {
                const cand = Buffer.concat([cur.subarray(0, i), cur.subarray(i + len)]);
                if (cand.length && ours(enc, [cand])[0] !== theirs(enc, cand)) {
                    cur = cand;
                    changed = true;
                    break;
                }
            }
        }
    }
    return cur;
}

let bad = 0, total = 0;
for (let it = 0; it < iters; it++) {
    const texts = [];
    for (let i = 0; i < 3000; i++)
        texts.push(rnd() < 0.85 ? Buffer.from(randomText(), 'utf8') : randomBytes());
    for (const enc of Object.keys(encs)) {
        const got = ours(enc, texts);
        for (let i = 0; i < texts.length; i++) {
            total++;
            if (got[i] === theirs(enc, texts[i])) continue;
            bad++;
            const small = shrink(enc, texts[i]);
            console.log(`MISMATCH ${enc}: ${JSON.stringify(dec.decode(small))} bytes=${small.toString('hex')}`);
            console.log(`  ours:     ${ours(enc, [small])[0]}`);
            console.log(`  tiktoken: ${theirs(enc, small)}`);
            if (bad > 20) process.exit(1);
        }
    }
}
fs.rmSync(tmp, { recursive: true });
console.log(`${total} texts compared, ${bad} mismatches`);
process.exit(bad ? 1 : 0);
