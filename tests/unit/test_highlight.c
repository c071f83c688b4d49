/* test_highlight.c - the code highlighter: token classes per language, state carried over
 * lines, aliases, span invariants, and its use by the Markdown styler (chunking invariance). */
#include "config.h"
#include "tap.h"
#include "text/highlight.h"
#include "text/markdown.h"
#include "text/wrap.h"
#include "base/buf.h"
#include "base/xmalloc.h"

#include <string.h>

/* Short names of the token slots in the dumps. */
static const char *short_name(int slot)
{
    switch (slot) {
    case THEME_CODE_KEYWORD: return "kw";
    case THEME_CODE_TYPE: return "ty";
    case THEME_CODE_STRING: return "str";
    case THEME_CODE_COMMENT: return "com";
    case THEME_CODE_NUMBER: return "num";
    case THEME_CODE_FUNCTION: return "fn";
    case THEME_CODE_PREPROC: return "pp";
    case THEME_CODE_ADDED: return "add";
    case THEME_CODE_REMOVED: return "del";
    default: return theme_slot_name(slot);
    }
}

static int spans_ok(const struct hl_spans *o, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (o->v[i].off != at || o->v[i].len == 0 || o->v[i].slot >= THEME_SLOT_COUNT)
            return 0;
        if (i && o->v[i].slot == o->v[i - 1].slot)
            return 0; /* neighbours in one slot are merged */
        at += o->v[i].len;
    }
    return at == n;
}

/* Highlight text (lines separated by \n) in language lang; the tokens that are not plain code,
 * as "slot(text) ..." with " / " between lines. */
static char *hl_dump(const char *lang, const char *text, int *bad)
{
    const struct hl_lang *l = hl_lang_find(lang, strlen(lang));
    struct buf b = BUF_INIT;
    if (!l) {
        buf_appends(&b, "(unknown language)");
        return buf_take(&b);
    }
    struct hl *h = hl_new(l);
    struct hl_state st = HL_STATE_INIT;
    struct hl_spans o = {NULL, 0, 0};
    const char *p = text;
    for (int first = 1;; first = 0) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        hl_line(h, &st, p, n, &o);
        if (!spans_ok(&o, n))
            *bad = 1;
        if (!first)
            buf_appends(&b, " /");
        for (size_t i = 0; i < o.n; i++) {
            if (o.v[i].slot == THEME_CODE)
                continue;
            buf_printf(&b, " %s(", short_name(o.v[i].slot));
            buf_append(&b, p + o.v[i].off, o.v[i].len);
            buf_appendc(&b, ')');
        }
        if (!e)
            break;
        p = e + 1;
    }
    hl_spans_free(&o);
    hl_free(h);
    return buf_take(&b);
}

static void check(const char *lang, const char *text, const char *want)
{
    int bad = 0;
    char *got = hl_dump(lang, text, &bad);
    const char *g = got[0] == ' ' ? got + 1 : got;
    TAP_STR(g, want, lang);
    TAP_OK(!bad, "%s: spans cover every line exactly", lang);
    free(got);
}

static const struct {
    const char *lang, *text, *want;
} samples[] = {
    {"c", "#include <stdio.h>\nstatic int add(int a) { return a + 0x1F; } // sum\n"
          "/* multi\n  line */ char *s = \"a\\\"b\", c = 'x';",
     "pp(#include <stdio.h>) / kw(static) ty(int) fn(add) ty(int) kw(return) num(0x1F) com(// sum) / com(/* multi) / com(  line */) ty(char) str(\"a\\\"b\") str('x')"},
    {"c++", "template <typename T> class Box : public Base {\n  std::string s = R; nullptr;\n};",
     "kw(template) kw(typename) kw(class) ty(Box) kw(public) / ty(std) ty(string) num(nullptr) /"},
    {"cs", "public class Foo { private readonly List<int> xs = new(); string s = \"x\"; }",
     "kw(public) kw(class) ty(Foo) kw(private) kw(readonly) ty(List) ty(int) kw(new) ty(string) str(\"x\")"},
    {"java", "@Override\npublic static void main(String[] args) { int n = 42; }",
     "pp(@Override) / kw(public) kw(static) ty(void) fn(main) ty(String) ty(int) num(42)"},
    {"kt", "fun greet(name: String): Unit = println(\"hi $name\")\n/* a /* nested */ still */ val x = 1",
     "kw(fun) fn(greet) ty(String) ty(Unit) fn(println) str(\"hi $name\") / com(/* a /* nested */ still */) kw(val) num(1)"},
    {"swift", "func area(r: Double) -> Double { let pi = 3.14; return pi * r * r } // ok",
     "kw(func) fn(area) ty(Double) ty(Double) kw(let) num(3.14) kw(return) com(// ok)"},
    {"go", "func main() {\n\tfmt.Println(`raw\nstill raw`, 'x', nil)\n}",
     "kw(func) fn(main) / fn(Println) str(`raw) / str(still raw`) str('x') num(nil) /"},
    {"rs", "#[derive(Debug)]\nfn longest<'a>(x: &'a str) -> Option<String> { println!(\"{}\", r#\"raw\"#); }",
     "pp(#[derive(Debug)]) / kw(fn) fn(longest) ty('a) ty('a) ty(str) ty(Option) ty(String) pp(println!) str(\"{}\") str(r#\"raw\"#)"},
    {"js", "const f = async (x) => { return `t ${x}\nline2` + 'q' + 1e3; } // c",
     "kw(const) kw(async) kw(return) str(`t ${x}) / str(line2`) str('q') num(1e3) com(// c)"},
    {"ts", "interface P { name: string; age?: number }\nexport class Foo implements P {}",
     "kw(interface) ty(P) ty(string) ty(number) / kw(export) kw(class) ty(Foo) kw(implements)"},
    {"py", "@dataclass\nclass Point:\n    def norm(self, k=2.5):\n        \"\"\"Doc\n        string\"\"\"\n"
           "        return f'{k}' if True else None  # note",
     "pp(@dataclass) / kw(class) ty(Point) / kw(def) fn(norm) num(self) num(2.5) / str(\"\"\"Doc) / str(        string\"\"\") / kw(return) str(f'{k}') kw(if) num(True) kw(else) num(None) com(# note)"},
    {"rb", "def hello(name)\n  puts \"hi #{name}\" # greet\nend\n=begin\nblock\n=end\n@x = :sym",
     "kw(def) fn(hello) / fn(puts) str(\"hi #{name}\") com(# greet) / kw(end) / com(=begin) / com(block) / com(=end) / pp(@x)"},
    {"php", "<?php\nfunction f($a) { echo \"x\"; return $a ?? null; } # c\n?>",
     "pp(<?php) / kw(function) fn(f) pp($a) kw(echo) str(\"x\") kw(return) pp($a) num(null) com(# c) / pp(?>)"},
    {"lua", "local function f(t) -- comment\n  return [[long\nstring]], nil\nend\n--[[ block\n]] x = 1",
     "kw(local) kw(function) fn(f) com(-- comment) / kw(return) str([[long) / str(string]]) num(nil) / kw(end) / com(--[[ block) / com(]]) num(1)"},
    {"bash", "#!/bin/sh\nif [ -n \"$HOME\" ]; then echo ${USER} 'it''s' # c\nfi\nX=1 ls a#b",
     "com(#!/bin/sh) / kw(if) str(\"$HOME\") kw(then) fn(echo) pp(${USER}) str('it''s') com(# c) / kw(fi) / ty(X) num(1) fn(ls)"},
    {"sql", "SELECT id, count(*) FROM users WHERE name = 'bob' -- c\n/* x */ INSERT INTO t VALUES (1);",
     "kw(SELECT) fn(count) kw(FROM) kw(WHERE) str('bob') com(-- c) / com(/* x */) kw(INSERT) kw(INTO) kw(VALUES) num(1)"},
    {"json", "{\"key\": \"value\", \"n\": -1.5e3, \"ok\": true, \"nil\": null}",
     "ty(\"key\") str(\"value\") ty(\"n\") num(1.5e3) ty(\"ok\") num(true) ty(\"nil\") num(null)"},
    {"yml", "# conf\nname: app\nports:\n  - 8080\nenabled: true\ntext: \"quoted\" # c",
     "com(# conf) / ty(name) / ty(ports) / num(8080) / ty(enabled) num(true) / ty(text) str(\"quoted\") com(# c)"},
    {"toml", "[package]\nname = \"tokterm\"\nversion = 1\n[[bin]]\ndesc = \"\"\"multi\nline\"\"\"",
     "kw([package]) / ty(name) str(\"tokterm\") / ty(version) num(1) / kw([[bin]]) / ty(desc) str(\"\"\"multi) / str(line\"\"\")"},
    {"ini", "[core]\n; comment\neditor = vim",
     "kw([core]) / com(; comment) / ty(editor)"},
    {"html", "<!DOCTYPE html>\n<a href=\"x.html\" class='c'>link &amp; more</a>\n<!-- a\ncomment -->\n"
             "<div\n  id=\"d\">",
     "pp(<!DOCTYPE) ty(html) kw(>) / kw(<a) ty(href) str(\"x.html\") ty(class) str('c') kw(>) num(&amp;) kw(</a>) / com(<!-- a) / com(comment -->) / kw(<div) / ty(id) str(\"d\") kw(>)"},
    {"xml", "<?xml version=\"1.0\"?>\n<root attr=\"v\"/>",
     "pp(<?xml) ty(version) str(\"1.0\") kw(?>) / kw(<root) ty(attr) str(\"v\") kw(/>)"},
    {"css", "@media screen {\n  .a:hover { color: #fff; margin: 10px !important; }\n}",
     "pp(@media) / ty(color) num(#fff) ty(margin) num(10px) kw(important) /"},
    {"md", "# Title\n- item with `code`\n> quote\nsee [x](http://e.com)\n```\nverbatim\n```",
     "kw(# Title) / kw(-) str(`code`) / com(> quote) / fn((http://e.com)) / pp(```) / str(verbatim) / pp(```)"},
    {"diff", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-old\n+new\n same",
     "kw(diff --git a/x b/x) / kw(--- a/x) / kw(+++ b/x) / pp(@@ -1,2 +1,2 @@) / del(-old) / add(+new) /"},
    {"dockerfile", "FROM debian:12 AS build\nRUN apt-get update && echo $HOME # c\nENV from=1",
     "kw(FROM) num(12) / kw(RUN) pp($HOME) com(# c) / kw(ENV) num(1)"},
    {"make", "CC := gcc\nall: main.o\n\t$(CC) -o $@ $^ # link\nifeq ($(X),1)\nendif",
     "ty(CC) / fn(all) / pp($(CC)) pp($@) pp($^) com(# link) / kw(ifeq) pp($(X)) num(1) / kw(endif)"},
};

static void test_languages(void)
{
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
        check(samples[i].lang, samples[i].text, samples[i].want);
}

static void test_find(void)
{
    static const char *const names[][2] = {
        {"Python", "python"}, {"py3 {.numberLines}", "python"}, {"language-js", "javascript"},
        {"c++", "cpp"},       {"sh", "shell"},                  {"zsh", "shell"},
        {"yml", "yaml"},      {"TS", "typescript"},             {"golang", "go"},
        {"c#", "csharp"},     {"patch", "diff"},                {"Dockerfile", "dockerfile"},
        {"jsonc", "json"},    {"svg", "xml"},                   {"htm", "html"},
        {"scss", "css"},      {"md", "markdown"},               {"mk", "makefile"},
        {"rb", "ruby"},       {"php", "php"},                   {"rs", "rust"},
        {"kt", "kotlin"},     {"lua", "lua"},                   {"swift", "swift"},
        {"java", "java"},     {"postgres", "sql"},              {"toml", "toml"},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct hl_lang *l = hl_lang_find(names[i][0], strlen(names[i][0]));
        if (!l || strcmp(hl_lang_name(l), names[i][1]) != 0) {
            ok = 0;
            TAP_OK(0, "'%s' is %s (got %s)", names[i][0], names[i][1],
                   l ? hl_lang_name(l) : "none");
        }
    }
    TAP_OK(ok, "info strings and aliases find their language (case, attributes, language-)");
    TAP_OK(hl_lang_find("brainfuck", 9) == NULL, "an unknown language is plain code");
    TAP_OK(hl_lang_find("", 0) == NULL, "no info string is plain code");
    TAP_OK(hl_lang_find("pythonpythonpythonpythonpythonpython", 36) == NULL,
           "an over-long word is no language");
    TAP_OK(hl_lang_count() >= 20, "at least 20 languages (%zu)", hl_lang_count());
    int distinct = 1;
    for (size_t i = 0; i < hl_lang_count(); i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(hl_lang_name(hl_lang_at(i)), hl_lang_name(hl_lang_at(j))) == 0)
                distinct = 0;
    TAP_OK(distinct && hl_lang_at(hl_lang_count()) == NULL, "language names are distinct");
}

/* Lines still open at the end carry over; an unterminated one-line string does not. */
static void test_state(void)
{
    check("c", "/* a\n\n b */ x\n\"open\nint", "com(/* a) / / com( b */) / str(\"open) / ty(int)");
    check("py", "s = '''a\n# not a comment\n'''  # yes",
          "str('''a) / str(# not a comment) / str(''') com(# yes)");
    check("rust", "/* a /* b */ still\n*/ fn", "com(/* a /* b */ still) / com(*/) kw(fn)");
    check("js", "`a\\`\nb` + 1", "str(`a\\`) / str(b`) num(1)");
    check("go", "`a\\`\nb", "str(`a\\`) /");
    check("html", "<p title=\"a\nb\">t</p>", "kw(<p) ty(title) str(\"a) / str(b\") kw(>) kw(</p>)");
    check("sql", "x = 'it''s'", "str('it''s')");
    check("rust", "let c = 'x'; let s = r##\"a\"#b\"##;",
          "kw(let) str('x') kw(let) str(r##\"a\"#b\"##)");
}

/* A line that ends inside nothing leaves the initial state, whatever it closed on the way:
 * the lines a document highlights when drawn are kept by their state, and only those whose
 * state is not the initial one take room (wrap.c; the close of the last string left in it
 * made nearly every line after a string's one). */
static void test_state_clean(void)
{
    static const char *const lines[][2] = {
        {"py", "key = f\"{name}-{{i}}\" + 'x' * 3  # counts"},
        {"c", "/* a */ x = \"s\\\"\" + 'c';"},
        {"rust", "/* a /* b */ c */ let s = r#\"x\"#;"},
        {"html", "<p title=\"a\">t</p>"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const struct hl_lang *l = hl_lang_find(lines[i][0], strlen(lines[i][0]));
        struct hl *h = hl_new(l);
        struct hl_state st = HL_STATE_INIT, init = HL_STATE_INIT, sc = HL_STATE_INIT;
        struct hl_spans sp = {NULL, 0, 0};
        hl_line(h, &st, lines[i][1], strlen(lines[i][1]), &sp);
        hl_scan(h, &sc, lines[i][1], strlen(lines[i][1]));
        TAP_OK(memcmp(&st, &init, sizeof st) == 0 && memcmp(&sc, &init, sizeof sc) == 0,
               "%s: a line closed inside leaves the initial state: %s", lines[i][0],
               lines[i][1]);
        hl_spans_free(&sp);
        hl_free(h);
    }
}

/* Hostile lines: long runs of openers, many hashes, bytes >= 0x80, NULs. */
static void test_hostile(void)
{
    size_t n = 1 << 18;
    char *big = xmalloc(n);
    static const char fill[] = "\"/*'`#[$@<&{(";
    int ok = 1;
    struct hl_spans o = {NULL, 0, 0};
    for (size_t k = 0; k < hl_lang_count(); k++) {
        struct hl *h = hl_new(hl_lang_at(k));
        for (size_t f = 0; f < sizeof(fill) - 1; f++) {
            memset(big, fill[f], n);
            struct hl_state st = HL_STATE_INIT;
            hl_line(h, &st, big, n, &o);
            ok &= spans_ok(&o, n);
            hl_line(h, &st, big, n, &o);
            ok &= spans_ok(&o, n);
        }
        for (size_t i = 0; i < n; i++)
            big[i] = (char)(i * 2654435761u >> 13);
        struct hl_state st = HL_STATE_INIT;
        hl_line(h, &st, big, n, &o);
        ok &= spans_ok(&o, n);
        hl_free(h);
    }
    TAP_OK(ok, "256 KiB lines of openers and random bytes: spans cover them in every language");
    hl_spans_free(&o);
    free(big);
}

/* hl_scan leaves the state hl_line leaves, line after line, in every language: random lines of
 * the bytes that open and close comments, strings and tags (a line highlighted later from the
 * saved state is coloured as if highlighted at once). */
static void test_scan(void)
{
    static const char *const frag[] = {
        "\"", "'", "`", "/*", "*/", "//", "#", "--", "--[[", "]]", "[[", "<!--", "-->", "<",
        ">", "\\", "r\"", "r#\"", "\"#", "'''", "\"\"\"", "=begin", "=end", "$", "${", "@",
        "[", "]", " ", "  ", "\t", "a", "x1", "def", "if", "0x1F", "1.5e3", "'a", "<?php", "?>",
        "{", "}", ":", "=", "\xC3\xA9", "f", "b'", "```", "~~~", "+", "-", ";", "&amp;", "/"};
    size_t nf = sizeof(frag) / sizeof(frag[0]);
    struct hl_spans o = {NULL, 0, 0};
    unsigned seed = 12345;
    size_t lines = 0, differ = 0;
    int same = 1;
    for (size_t k = 0; k < hl_lang_count(); k++) {
        struct hl *h = hl_new(hl_lang_at(k));
        for (int doc = 0; doc < 20; doc++) {
            struct hl_state a = HL_STATE_INIT, b = HL_STATE_INIT;
            for (int line = 0; line < 40; line++) {
                char buf[256];
                size_t n = 0;
                seed = seed * 1103515245u + 12345u;
                int parts = (int)((seed >> 16) % 14);
                for (int p = 0; p < parts; p++) {
                    seed = seed * 1103515245u + 12345u;
                    const char *f = frag[(seed >> 16) % nf];
                    size_t fl = strlen(f);
                    memcpy(buf + n, f, fl);
                    n += fl;
                }
                struct hl_state before = a;
                hl_line(h, &a, buf, n, &o);
                hl_scan(h, &b, buf, n);
                lines++;
                differ += memcmp(&before, &a, sizeof(a)) != 0;
                if (memcmp(&a, &b, sizeof(a)) != 0) {
                    if (same)
                        TAP_OK(0, "%s: hl_scan's state differs from hl_line's after '%.*s'",
                               hl_lang_name(hl_lang_at(k)), (int)n, buf);
                    same = 0;
                    b = a;
                }
            }
        }
        hl_free(h);
    }
    hl_spans_free(&o);
    TAP_OK(same, "hl_scan leaves hl_line's state after each of %zu random lines (%zu change it)",
           lines, differ);
    TAP_OK(differ > lines / 10, "and the lines open and close regions often (%zu of %zu)", differ,
           lines);
}

/* A Markdown document with highlighted blocks, fed in pieces. */
static const char doc[] =
    "Some *text*.\n\n```python\ndef f(x):\n    \"\"\"doc\n    more\"\"\"\n    return x + 1  # c\n"
    "```\n- item\n\n  ```c\n  /* open\n  close */ int y = 0x10;\n  ```\n\n```html\n"
    "<a href=\"x\n\">t</a>\n```\n```nosuchlang\nplain 1 \"x\"\n```\n";

static void md_dump(struct markdown *md, struct buf *b)
{
    for (size_t i = 0; i < markdown_count(md); i++) {
        const struct markdown_line *l = markdown_line(md, i);
        buf_printf(b, "%d:", l->kind);
        for (size_t k = 0; k < l->wl.nspans; k++) {
            buf_printf(b, " %s(", theme_slot_name(l->wl.spans[k].slot));
            buf_append(b, l->wl.text + l->wl.spans[k].off, l->wl.spans[k].len);
            buf_appendc(b, ')');
        }
        buf_appendc(b, '\n');
    }
}

static char *md_run(const char *s, size_t n, size_t cut, int bytewise, int highlight)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    markdown_set_highlight(md, highlight);
    if (bytewise) {
        for (size_t i = 0; i < n; i++) {
            markdown_feed(md, s + i, 1);
            size_t np = markdown_pending_count(md); /* previews must not disturb the state */
            for (size_t k = 0; k < np; k++)
                (void)markdown_pending_line(md, k);
        }
    } else {
        markdown_feed(md, s, cut);
        if (markdown_pending_count(md))
            (void)markdown_pending_line(md, 0);
        markdown_feed(md, s + cut, n - cut);
    }
    markdown_finish(md);
    struct buf b = BUF_INIT;
    md_dump(md, &b);
    markdown_free(md);
    return buf_take(&b);
}

static void test_markdown(void)
{
    size_t n = sizeof(doc) - 1;
    char *whole = md_run(doc, n, n, 0, 1);
    int good = strstr(whole, "code-keyword(def)") && strstr(whole, "code-function(f)") &&
               strstr(whole, "code-string(    more\"\"\")") &&
               strstr(whole, "code-comment(close */)") && strstr(whole, "code-number(0x10)") &&
               strstr(whole, "code-string(\")") && strstr(whole, "code(plain 1 \"x\")");
    TAP_OK(good, "blocks highlighted, state carried over lines, unknown language plain");
    if (!good)
        printf("# %s\n", whole);
    int same = 1;
    size_t cuts = 0;
    for (size_t cut = 0; cut <= n; cut++, cuts++) {
        char *part = md_run(doc, n, cut, 0, 1);
        if (strcmp(part, whole) != 0) {
            same = 0;
            TAP_STR(part, whole, "split");
        }
        free(part);
    }
    TAP_OK(same, "a split at every byte gives the same spans (%zu splits, previews asked)", cuts);
    char *bytes = md_run(doc, n, 0, 1, 1);
    TAP_STR(bytes, whole, "1-byte chunks with previews give the same spans");
    free(bytes);
    char *plain = md_run(doc, n, n, 0, 0);
    TAP_OK(!strstr(plain, "code-keyword") && strstr(plain, "code(def f(x):)"),
           "markdown_set_highlight(md, 0): code lines in the code slot only");
    free(plain);
    free(whole);
}

/* Rows of a wrap_doc fed by a styler that highlights lines when they are drawn: every row, asked
 * for in any order and after a rewrap, has the spans of the same row of a document fed by a
 * styler that highlights at once; and lines never asked for are never highlighted. */
static const char lazy_doc[] =
    "Intro *text* and `code`.\n\n```python\n@dataclass\nclass P:\n    \"\"\"doc\n    more\"\"\"\n"
    "    def f(self, x=0x1F):  # c\n        return f'{x}' + \"s\" * 3\n```\n"
    "- a list item\n\n  ```c\n  /* open\n  still open */ int y = 0x10; // end\n  #define X 1\n"
    "  char *s = \"a\\\"b\";\n  ```\n\n```html\n<a href=\"x\n\">t</a> &amp;\n```\n"
    "```rust\nfn main() { let r = r#\"raw \"# ; /* a /* nested */ b */ }\n```\n"
    "```nosuchlang\nplain 1 \"x\"\n```\n```js\nconst t = `multi\nline ${x}` + 'q';\n```\n";

static struct wrap_doc *lazy_feed(const char *s, size_t n, int later, int width)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    if (later)
        markdown_highlight_when_drawn(md);
    struct wrap_doc *d = wrap_doc_new(width);
    size_t done = 0;
    for (size_t at = 0; at < n; at += 7) { /* in pieces, lines released as they go */
        markdown_feed(md, s + at, n - at < 7 ? n - at : 7);
        for (; done < markdown_count(md); done++) {
            const struct markdown_line *ml = markdown_line(md, done);
            wrap_doc_push_hl(d, &ml->wl, ml->hl);
        }
        markdown_release(md, done);
    }
    markdown_finish(md);
    for (; done < markdown_count(md); done++) {
        const struct markdown_line *ml = markdown_line(md, done);
        wrap_doc_push_hl(d, &ml->wl, ml->hl);
    }
    markdown_free(md);
    return d;
}

static void row_dump(struct wrap_doc *d, size_t r, struct buf *b)
{
    struct wrap_view v;
    if (wrap_doc_row(d, r, &v) != 0) {
        buf_appends(b, "(none)\n");
        return;
    }
    buf_printf(b, "%zu:", v.line);
    for (size_t k = 0; k < v.nspans; k++) {
        buf_printf(b, " %s/%u(", theme_slot_name(v.spans[k].slot), v.spans[k].attrs);
        buf_append(b, v.text + v.spans[k].off, v.spans[k].len);
        buf_appendc(b, ')');
    }
    buf_appendc(b, '\n');
}

static void test_when_drawn(void)
{
    size_t n = sizeof(lazy_doc) - 1;
    int same = 1;
    for (int width = 12; width <= 80; width += 17) {
        struct wrap_doc *now = lazy_feed(lazy_doc, n, 0, width);
        struct wrap_doc *later = lazy_feed(lazy_doc, n, 1, width);
        size_t rows = wrap_doc_rows(now);
        TAP_OK(wrap_doc_rows(later) == rows && wrap_doc_highlighted(later) == 0,
               "width %d: the same %zu rows, none highlighted before one is drawn", width, rows);
        struct buf a = BUF_INIT, b = BUF_INIT;
        for (size_t r = rows; r-- > 0;) /* from the end up, as scrolling back does */
            row_dump(later, r, &b);
        wrap_doc_set_width(later, width + 9); /* and after a rewrap */
        wrap_doc_set_width(later, width);
        for (int twice = 0; twice < 2; twice++)
            for (size_t r = rows; r-- > 0;)
                row_dump(now, r, &a);
        for (size_t r = rows; r-- > 0;)
            row_dump(later, r, &b);
        if (strcmp(buf_str(&a), buf_str(&b)) != 0) {
            same = 0;
            TAP_STR(buf_str(&b), buf_str(&a), "rows highlighted when drawn");
        }
        buf_free(&a);
        buf_free(&b);
        wrap_doc_free(now);
        wrap_doc_free(later);
    }
    TAP_OK(same, "a code line highlighted when first drawn has the spans it has highlighted at once");

    /* a document that takes another's lines (wrap_doc_splice) takes their highlighting later */
    const char *cut = strstr(lazy_doc, "```html");
    struct wrap_doc *now = lazy_feed(lazy_doc, n, 0, 40);
    struct wrap_doc *head = lazy_feed(lazy_doc, (size_t)(cut - lazy_doc), 1, 40);
    struct wrap_doc *tail = lazy_feed(cut, n - (size_t)(cut - lazy_doc), 1, 40);
    struct buf a = BUF_INIT, b = BUF_INIT;
    row_dump(head, 3, &a); /* one line highlighted before the splice, the rest after */
    buf_reset(&a);
    wrap_doc_splice(head, tail);
    for (size_t r = wrap_doc_rows(now); r-- > 0;) {
        row_dump(now, r, &a);
        row_dump(head, r, &b);
    }
    TAP_STR(buf_str(&b), buf_str(&a), "a spliced document's lines highlighted when drawn");
    buf_free(&a);
    buf_free(&b);
    wrap_doc_free(now);
    wrap_doc_free(head);
    wrap_doc_free(tail);

    /* 2,000 code lines, the last screenful drawn: only its lines are highlighted */
    struct buf big = BUF_INIT;
    buf_appends(&big, "```python\n");
    for (int i = 0; i < 2000; i++)
        buf_printf(&big, "def f%d(x):  # %d\n    return \"%d\" + x\n", i, i, i);
    buf_appends(&big, "```\n");
    struct wrap_doc *d = lazy_feed(big.data, big.len, 1, 80);
    size_t rows = wrap_doc_rows(d);
    struct buf sink = BUF_INIT;
    for (size_t r = rows - 40; r < rows; r++)
        row_dump(d, r, &sink);
    for (size_t r = rows - 40; r < rows; r++) /* drawn again: not highlighted again */
        row_dump(d, r, &sink);
    TAP_OK(wrap_doc_highlighted(d) <= 40 && strstr(buf_str(&sink), "code-keyword/0(return)"),
           "4,000 code lines, the last 40 rows drawn twice: %zu lines highlighted",
           wrap_doc_highlighted(d));
    buf_free(&sink);
    buf_free(&big);
    wrap_doc_free(d);
}

int main(void)
{
    test_languages();
    test_find();
    test_state();
    test_state_clean();
    test_hostile();
    test_scan();
    test_markdown();
    test_when_drawn();
    return tap_done();
}
