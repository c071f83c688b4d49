#!/usr/bin/env node
// gen-token-corpus.js - writes the generated part of tests/tokenizer/corpus/ and, for every
// corpus file, tests/tokenizer/expected/<name>.json with the ids the reference tiktoken npm
// package gives for o200k_base and cl100k_base.
//
//   mkdir -p /tmp/npmwork && (cd /tmp/npmwork && npm install tiktoken)
//   NODE_PATH=/tmp/npmwork/node_modules node tools/gen-token-corpus.js
//
// Hand-written corpus files (prose, code, scripts, ...) are left as they are; the files listed in
// GENERATED are rewritten each run (deterministic: fixed seeds). Each corpus file is read as
// bytes and decoded the way a JS caller would hand it to tiktoken: WHATWG UTF-8 decoding (every
// ill-formed subsequence becomes U+FFFD, a leading BOM is kept), then encode_ordinary (special
// token text is ordinary text). tokterm's C tokenizer must reproduce these ids from the raw bytes.
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding } = require('tiktoken');

const root = path.join(__dirname, '..', 'tests', 'tokenizer');
const corpusDir = path.join(root, 'corpus');
const expectedDir = path.join(root, 'expected');
const ENCODINGS = ['o200k_base', 'cl100k_base'];
// the package's "exports" hides package.json: find it next to the resolved entry point
const tiktokenVersion = JSON.parse(fs.readFileSync(
    path.join(path.dirname(require.resolve('tiktoken')), 'package.json'), 'utf8')).version;

let seed = 0;
function rnd() { // xorshift32, deterministic
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];

function mixedRandom() {
    seed = 20240513;
    const groups = [
        'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '     ', '0123456789', "''",
        'sStTmMdDlLrReEvV', '\n\r\t', '/', '.,;:!?-_()[]{}<>"#$%&*+=@\\^`|~',
        '\u00a0\u3000\u2028\u0085\u000b\u000c\u200b\ufeff\u2009', '\u017f\u212a\u01c5\u0130',
        '\u0300\u0301\u0308\u064b\u093e\u094d\ufe0f\u200d', '\u02b0\u3005\uff70',
        'éüñçÉÜÑÇ', 'абвгдАБВГД', 'αβγΑΒΓ', '日本語中文かなカナ한국어', 'العربية', 'हिन्दी',
        '٠١٢٣٤²³½Ⅻ०१', ['😀', '👍🏽', '👨‍👩‍👧', '🇺🇸', '❤️', '#️⃣'], ['𝐀', '𝐚', '𠀀', '𐐀', '𐐨', '𝟘'],
    ];
    let s = '';
    while (Buffer.byteLength(s) < 30000) {
        const g = pick(groups);
        const chars = typeof g === 'string' ? Array.from(g) : g;
        const run = rnd() < 0.15 ? 1 + Math.floor(rnd() * 12) : 1 + Math.floor(rnd() * 3);
        for (let k = 0; k < run; k++)
            s += pick(chars);
    }
    return Buffer.from(s, 'utf8');
}

// Every 251st code point (no surrogates, no NUL) between letters, digits and punctuation, so each
// Unicode block's class shows up in o200k's case-aware and cl100k's letter/number rules.
function unicodeSweep() {
    const contexts = [['a', 'b '], ['A', 'B '], [' ', '/M '], ["'", "s' "], ['1', '2 ']];
    let s = '', i = 0;
    for (let cp = 0xa0; cp < 0x110000; cp += 251) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        const [a, b] = contexts[i++ % contexts.length];
        s += a + String.fromCodePoint(cp) + b;
        if (i % 16 === 0)
            s += '\n';
    }
    return Buffer.from(s, 'utf8');
}

function unicodeSpace() {
    const ws = ['\u00a0', '\u1680', '\u2000', '\u2005', '\u200a', '\u2028', '\u2029', '\u202f',
                '\u205f', '\u3000', '\u0085', '\u000b', '\u000c', '\u001c', '\u001f', '\u180e',
                '\u200b', '\ufeff', '\t', '\r', '\n', '\r\n', ' '];
    let s = '\ufeffBOM at the start\n';
    for (const w of ws) {
        s += `x${w}y ${w}${w}z ${w} ${w}\n`;
        s += `word${w}${w}${w}\n${w}tail${w}\n`;
    }
    s += 'trailing spaces then end   ';
    return Buffer.from(s, 'utf8');
}

function invalidUtf8() {
    const parts = [
        'valid start ', [0xff], ' lone FF ', [0xc0, 0xaf], ' overlong / ', [0xe0, 0x80, 0xaf],
        ' overlong 3 ', [0xed, 0xa0, 0x80], ' surrogate ', [0xf4, 0x90, 0x80, 0x80], ' > U+10FFFF ',
        [0xe2, 0x82], ' truncated euro ', [0xe2, 0x82, 0x41], ' truncated then A ', [0x80, 0x80],
        ' stray continuations ', [0xf0, 0x9f, 0x98], 'truncated emoji', [0xc3], 'é'.repeat(1),
        [0xf5, 0xf8, 0xfc, 0xfe], ' bytes never valid ', [0xe2, 0x82, 0xac], ' real euro ',
        "don", [0xe2, 0x80], "t ", [0xc2, 0xa0], 'nbsp', [0xc2], '\n', 'end ', [0xe6, 0x97],
    ];
    return Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));
}

const GENERATED = {
    'long_a.txt': () => Buffer.from('a'.repeat(5000)),
    'long_spaces.txt': () => Buffer.from(' '.repeat(3000)),
    'long_bang.txt': () => Buffer.from('!'.repeat(2000)),
    'long_mixed_runs.txt': () => Buffer.from('x' + ' '.repeat(1000) + 'y' + '\n'.repeat(500) +
                                             '0'.repeat(1001) + 'Z'.repeat(700) + 'ab'.repeat(600) +
                                             '\u00e9'.repeat(400) + '\u{1f600}'.repeat(300) + '-'.repeat(999) + '\t'.repeat(300)),
    'mixed_random.txt': mixedRandom,
    'unicode_sweep.txt': unicodeSweep,
    'unicode_space.txt': unicodeSpace,
    'invalid_utf8.txt': invalidUtf8,
};

function main() {
    fs.mkdirSync(corpusDir, { recursive: true });
    fs.mkdirSync(expectedDir, { recursive: true });
    for (const [name, make] of Object.entries(GENERATED))
        fs.writeFileSync(path.join(corpusDir, name), make());
    const encs = Object.fromEntries(ENCODINGS.map((e) => [e, get_encoding(e)]));
    const dec = new TextDecoder('utf-8', { ignoreBOM: true });
    const names = fs.readdirSync(corpusDir).filter((f) => f.endsWith('.txt')).sort();
    for (const name of names) {
        const text = dec.decode(fs.readFileSync(path.join(corpusDir, name)));
        const out = { file: name, tiktoken: tiktokenVersion };
        for (const e of ENCODINGS)
            out[e] = Array.from(encs[e].encode_ordinary(text));
        const json = '{\n' + Object.entries(out).map(([k, v]) => '  ' + JSON.stringify(k) + ': ' +
                                                     JSON.stringify(v)).join(',\n') + '\n}\n';
        fs.writeFileSync(path.join(expectedDir, name.replace(/\.txt$/, '.json')), json);
        console.log(name + ': ' + ENCODINGS.map((e) => e + ' ' + out[e].length).join(', '));
    }
    for (const e of Object.values(encs))
        e.free();
}

main();
