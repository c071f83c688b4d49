/* highlight.c - a table-driven syntax highlighter for code lines (see highlight.h). */
#include "config.h"
#include "text/highlight.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/xmalloc.h"

/* Scanners. */
enum { K_CODE, K_DIFF, K_MARKUP, K_MARKDOWN };

/* Flags of a language. */
#define F_DQ 0x00000001u       /* "strings" */
#define F_SQ 0x00000002u       /* 'strings' */
#define F_BQ 0x00000004u       /* `strings` */
#define F_DQML 0x00000008u     /* "strings" may span lines */
#define F_SQML 0x00000010u     /* 'strings' may span lines */
#define F_BQML 0x00000020u     /* `strings` may span lines */
#define F_SQRAW 0x00000040u    /* no backslash escapes in 'strings' */
#define F_BQRAW 0x00000080u    /* no backslash escapes in `strings` */
#define F_TRIPLE 0x00000100u   /* """ and ''' strings over lines */
#define F_HASHPP 0x00000200u   /* # at the start of a line: preprocessor line */
#define F_AT 0x00000400u       /* @name: decorator, annotation, attribute, @ivar */
#define F_DOLLAR 0x00000800u   /* $name ${...} $(: variables (preproc slot) */
#define F_CASEI 0x00001000u    /* keywords in any case */
#define F_FIRSTWORD 0x00002000u /* keywords only as a line's first word */
#define F_CAPTYPE 0x00004000u  /* Capitalised words are types */
#define F_KEYCOLON 0x00008000u /* word or "string" before ':' is a key (type slot) */
#define F_KEYEQ 0x00010000u    /* first word before '=' is a key (type slot) */
#define F_SECTION 0x00020000u  /* [section] lines */
#define F_MACRO 0x00040000u    /* name! is a macro (Rust) */
#define F_NESTC 0x00080000u    /* block comments nest */
#define F_RAWSTR 0x00100000u   /* r"..." r#"..."# (Rust) */
#define F_LIFETIME 0x00200000u /* 'a is a lifetime, not a character (Rust) */
#define F_TARGET 0x00400000u   /* "target:" at a line's start (make) */
#define F_DASHID 0x00800000u   /* '-' inside words (CSS, YAML, make) */
#define F_HEXCOLOR 0x01000000u /* #abc is a number (CSS) */
#define F_NOFUNC 0x02000000u   /* name( is not a call */
#define F_SHCOMMENT 0x04000000u /* the line comment starts only at a word's start */
#define F_DOLLARID 0x08000000u /* '$' is a letter (JavaScript) */
#define F_HASHATTR 0x10000000u /* #[...] and #![...] attributes (Rust) */
#define F_PHPTAG 0x20000000u   /* <?php and ?> */
#define F_RUBYDOC 0x40000000u  /* =begin ... =end */
#define F_LUALONG 0x80000000u  /* [[long strings]] (Lua) */

struct hl_lang {
    const char *name;
    const char *aliases; /* space-separated, lower case */
    int kind;            /* K_* */
    unsigned flags;
    const char *lc1, *lc2;          /* line comments */
    const char *bc_open, *bc_close; /* block comment */
    const char *keywords;
    const char *types;
    const char *consts;   /* constants: the number slot */
    const char *builtins; /* the function slot */
    const char *defs;     /* keywords after which a name is a function */
    const char *typedefs; /* keywords after which a name is a type */
};

#define C_KW                                                                                     \
    "auto break case const continue default do else enum extern for goto if inline register "   \
    "restrict return sizeof static struct switch typedef union volatile while _Alignas "        \
    "_Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local alignas alignof "          \
    "static_assert thread_local typeof"
#define C_TYPES                                                                                  \
    "void char short int long float double signed unsigned bool _Bool _Complex size_t ssize_t "  \
    "ptrdiff_t intptr_t uintptr_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t "     \
    "uint64_t wchar_t off_t FILE va_list"
#define C_CONSTS "NULL true false EOF stdin stdout stderr errno"
#define JS_KW                                                                                    \
    "async await break case catch class const continue debugger default delete do else export " \
    "extends finally for from function get if import in instanceof let new of return set "     \
    "static super switch this throw try typeof var void while with yield as"
#define JS_CONSTS "true false null undefined NaN Infinity"
#define JS_BUILTINS "console require module exports window document globalThis JSON Math"
#define SH_KW                                                                                    \
    "if then else elif fi case esac for while until do done in function select time return "    \
    "break continue local export readonly declare typeset unset shift exit"
#define SH_BUILTINS                                                                              \
    "echo printf read cd pwd test source eval exec trap set alias cat grep sed awk find xargs "  \
    "mkdir rm cp mv ls chmod chown curl wget tar git make sudo apt apt-get pip npm docker sort " \
    "uniq head tail tee wc cut tr touch ln kill env"
#define SQL_KW                                                                                   \
    "select from where and or not insert into values update set delete create table drop alter " \
    "add column index view as on join left right inner outer full cross natural using group by " \
    "order having limit offset union all distinct case when then else end is null like in "      \
    "between exists primary key foreign references unique check constraint default begin "      \
    "commit rollback transaction with recursive returning if replace trigger database schema "  \
    "grant revoke asc desc explain analyze vacuum pragma cascade autoincrement collate escape "  \
    "over partition window filter do nothing conflict upsert merge matched fetch first next "    \
    "rows only top"
#define SQL_TYPES                                                                                \
    "int integer smallint bigint tinyint serial bigserial decimal numeric real float double "    \
    "precision char varchar text blob boolean bool date time timestamp timestamptz interval "   \
    "json jsonb uuid bytea nvarchar"

static const struct hl_lang langs[] = {
    {"c", "c h", K_CODE, F_DQ | F_SQ | F_HASHPP, "//", NULL, "/*", "*/", C_KW, C_TYPES, C_CONSTS,
     "printf fprintf sprintf snprintf malloc calloc realloc free memcpy memset memmove strlen "
     "strcmp strncmp strcpy strncpy strdup fopen fclose fread fwrite assert exit abort",
     NULL, NULL},
    {"cpp", "cpp c++ cc cxx hpp hh h++ hxx cuda cu", K_CODE, F_DQ | F_SQ | F_HASHPP, "//", NULL,
     "/*", "*/",
     C_KW " class namespace template typename public private protected virtual override final "
          "new delete this friend operator using try catch throw noexcept constexpr consteval "
          "constinit decltype explicit mutable co_await co_return co_yield concept requires "
          "static_cast dynamic_cast const_cast reinterpret_cast export module import",
     C_TYPES " string vector map unordered_map set unique_ptr shared_ptr optional string_view "
             "array pair tuple std",
     C_CONSTS " nullptr", "cout cerr endl make_unique make_shared move forward", NULL,
     "class struct enum union namespace"},
    {"csharp", "csharp c# cs", K_CODE, F_DQ | F_SQ | F_HASHPP | F_CAPTYPE, "//", NULL, "/*", "*/",
     "abstract as async await base break case catch checked class const continue default "
     "delegate do else enum event explicit extern finally fixed for foreach goto if implicit in "
     "interface internal is lock namespace new operator out override params private protected "
     "public readonly record ref return sealed sizeof stackalloc static struct switch this throw "
     "try typeof unchecked unsafe using virtual volatile while yield var get set init where "
     "when",
     "bool byte char decimal double float int long object sbyte short string uint ulong ushort "
     "void dynamic nint nuint",
     "true false null", NULL, NULL, "class struct interface enum record"},
    {"java", "java", K_CODE, F_DQ | F_SQ | F_AT | F_CAPTYPE | F_TRIPLE, "//", NULL, "/*", "*/",
     "abstract assert break case catch class continue default do else enum extends final "
     "finally for if implements import instanceof interface native new package private "
     "protected public return static strictfp super switch synchronized this throw throws "
     "transient try volatile while var record sealed permits yield non-sealed",
     "boolean byte char double float int long short void", "true false null", NULL, NULL,
     "class interface enum record"},
    {"kotlin", "kotlin kt kts", K_CODE,
     F_DQ | F_SQ | F_AT | F_CAPTYPE | F_TRIPLE | F_NESTC | F_DOLLAR, "//", NULL, "/*", "*/",
     "as break class continue do else for fun if in interface is object package return super "
     "this throw try typealias typeof val var when while by catch constructor finally get "
     "import init set where abstract annotation companion data enum external final inline "
     "inner internal lateinit open operator out override private protected public sealed "
     "suspend vararg",
     NULL, "true false null", "println print listOf mapOf setOf mutableListOf", "fun",
     "class interface object typealias"},
    {"swift", "swift", K_CODE, F_DQ | F_AT | F_CAPTYPE | F_TRIPLE | F_NESTC | F_HASHPP, "//", NULL,
     "/*", "*/",
     "associatedtype class deinit enum extension fileprivate func import init inout internal "
     "let open operator private protocol public rethrows static struct subscript typealias var "
     "break case continue default defer do else fallthrough for guard if in repeat return "
     "switch where while as catch is super self throw throws try async await some any "
     "mutating override final lazy weak",
     NULL, "true false nil", "print", "func", "class struct enum protocol extension"},
    {"go", "go golang", K_CODE, F_DQ | F_SQ | F_BQ | F_BQML | F_BQRAW, "//", NULL, "/*", "*/",
     "break case chan const continue default defer else fallthrough for func go goto if import "
     "interface map package range return select struct switch type var",
     "bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune "
     "string uint uint8 uint16 uint32 uint64 uintptr any",
     "true false nil iota",
     "append cap close copy delete len make new panic print println recover", "func", "type"},
    {"rust", "rust rs", K_CODE,
     F_DQ | F_DQML | F_SQ | F_NESTC | F_RAWSTR | F_LIFETIME | F_MACRO | F_CAPTYPE | F_HASHATTR,
     "//", NULL, "/*", "*/",
     "as async await break const continue crate dyn else enum extern fn for if impl in let loop "
     "match mod move mut pub ref return self static struct super trait type unsafe use where "
     "while union",
     "bool char f32 f64 i8 i16 i32 i64 i128 isize str u8 u16 u32 u64 u128 usize Self String Vec "
     "Option Result Box",
     "true false None Some Ok Err", NULL, "fn", "struct enum trait type impl union"},
    {"javascript", "javascript js jsx mjs cjs node", K_CODE,
     F_DQ | F_SQ | F_BQ | F_BQML | F_DOLLARID, "//", NULL, "/*", "*/", JS_KW, NULL, JS_CONSTS,
     JS_BUILTINS, "function", "class"},
    {"typescript", "typescript ts tsx mts cts", K_CODE,
     F_DQ | F_SQ | F_BQ | F_BQML | F_DOLLARID | F_AT | F_CAPTYPE, "//", NULL, "/*", "*/",
     JS_KW " interface type enum implements namespace declare abstract private protected public "
           "readonly keyof infer is asserts satisfies",
     "string number boolean any unknown never void object bigint symbol", JS_CONSTS, JS_BUILTINS,
     "function", "class interface type enum"},
    {"python", "python py py3 python3 gyp pyw sage", K_CODE, F_DQ | F_SQ | F_TRIPLE | F_AT, "#",
     NULL, NULL, NULL,
     "and as assert async await break class continue def del elif else except finally for from "
     "global if import in is lambda nonlocal not or pass raise return try while with yield "
     "match case",
     "int float str bytes bool list dict set tuple object type complex frozenset bytearray",
     "True False None self cls",
     "print len range open enumerate zip map filter sorted reversed min max sum abs any all "
     "isinstance issubclass getattr setattr hasattr super iter next repr input format id hash",
     "def", "class"},
    {"ruby", "ruby rb rake gemspec", K_CODE,
     F_DQ | F_DQML | F_SQ | F_SQML | F_SQRAW | F_AT | F_CAPTYPE | F_RUBYDOC | F_SHCOMMENT, "#",
     NULL, NULL, NULL,
     "alias and begin break case class def defined? do else elsif end ensure for if in module "
     "next not or redo rescue retry return self super then undef unless until when while yield "
     "require require_relative include extend attr_accessor attr_reader attr_writer private "
     "protected public lambda proc",
     NULL, "true false nil", "puts print p raise", "def", "class module"},
    {"php", "php php3 php4 php5 php7 php8 phtml", K_CODE,
     F_DQ | F_DQML | F_SQ | F_SQML | F_DOLLAR | F_PHPTAG | F_CAPTYPE, "//", "#", "/*", "*/",
     "abstract and as break callable case catch class clone const continue declare default do "
     "echo else elseif empty enddeclare endfor endforeach endif endswitch endwhile enum extends "
     "final finally fn for foreach function global goto if implements include include_once "
     "instanceof insteadof interface isset list match namespace new or print private protected "
     "public readonly require require_once return static switch throw trait try unset use var "
     "while xor yield",
     "int float string bool array object mixed void iterable self parent",
     "true false null TRUE FALSE NULL", NULL, "function fn", "class interface trait enum"},
    {"lua", "lua luau", K_CODE, F_DQ | F_SQ | F_LUALONG, "--", NULL, "--[[", "]]",
     "and break do else elseif end for function goto if in local not or repeat return then "
     "until while",
     NULL, "true false nil", "print pairs ipairs require type tostring tonumber error pcall "
     "setmetatable getmetatable table string math os io",
     "function", NULL},
    {"shell", "shell sh bash zsh ksh fish shell-session console shellscript bat dash ash", K_CODE,
     F_DQ | F_DQML | F_SQ | F_SQML | F_SQRAW | F_BQ | F_BQML | F_DOLLAR | F_SHCOMMENT |
         F_KEYEQ | F_DASHID,
     "#", NULL, NULL, NULL, SH_KW, NULL, "true false", SH_BUILTINS, NULL, NULL},
    {"sql", "sql mysql postgresql postgres psql pgsql sqlite plsql tsql mariadb", K_CODE,
     F_DQ | F_SQ | F_SQML | F_SQRAW | F_CASEI, "--", NULL, "/*", "*/", SQL_KW, SQL_TYPES,
     "true false", "count sum avg min max coalesce nullif cast now lower upper length substr "
     "round abs ifnull", NULL, NULL},
    {"json", "json jsonc json5 geojson jsonl ndjson webmanifest", K_CODE,
     F_DQ | F_KEYCOLON | F_NOFUNC, "//", NULL, "/*", "*/", NULL, NULL, "true false null", NULL,
     NULL, NULL},
    {"yaml", "yaml yml", K_CODE, F_DQ | F_SQ | F_SQRAW | F_KEYCOLON | F_NOFUNC | F_SHCOMMENT |
     F_DASHID, "#", NULL, NULL, NULL, NULL, NULL, "true false null yes no on off True False "
     "Null", NULL, NULL, NULL},
    {"toml", "toml", K_CODE, F_DQ | F_SQ | F_SQRAW | F_TRIPLE | F_KEYEQ | F_SECTION | F_NOFUNC |
     F_DASHID, "#", NULL, NULL, NULL, NULL, NULL, "true false inf nan", NULL, NULL, NULL},
    {"ini", "ini cfg conf editorconfig properties gitconfig desktop systemd", K_CODE,
     F_DQ | F_KEYEQ | F_SECTION | F_NOFUNC | F_DASHID, "#", ";", NULL, NULL, NULL, NULL,
     "true false yes no on off", NULL, NULL, NULL},
    {"html", "html htm xhtml vue svelte erb jinja", K_MARKUP, 0, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL},
    {"xml", "xml svg xsd xsl xslt plist rss atom wsdl xaml csproj", K_MARKUP, 0, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    {"css", "css scss less sass", K_CODE,
     F_DQ | F_SQ | F_AT | F_KEYCOLON | F_DASHID | F_HEXCOLOR | F_DOLLAR, "//", NULL, "/*", "*/",
     "important inherit initial unset auto none and not only from to", NULL, NULL,
     "url rgb rgba hsl hsla var calc min max clamp", NULL, NULL},
    {"markdown", "markdown md mkd mdown gfm", K_MARKDOWN, 0, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL},
    {"diff", "diff patch udiff", K_DIFF, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL},
    {"dockerfile", "dockerfile docker containerfile", K_CODE,
     F_DQ | F_SQ | F_SQRAW | F_CASEI | F_FIRSTWORD | F_DOLLAR | F_SHCOMMENT | F_NOFUNC, "#", NULL,
     NULL, NULL,
     "from run cmd label maintainer expose env add copy entrypoint volume user workdir arg "
     "onbuild stopsignal healthcheck shell",
     NULL, NULL, NULL, NULL, NULL},
    {"makefile", "makefile make mk mak gnumake bsdmake", K_CODE,
     F_DQ | F_SQ | F_DOLLAR | F_TARGET | F_KEYEQ | F_DASHID | F_SHCOMMENT | F_NOFUNC, "#", NULL,
     NULL, NULL,
     "ifeq ifneq ifdef ifndef else endif include -include sinclude define endef export "
     "unexport override vpath",
     NULL, NULL, NULL, NULL, NULL},
};

#define NLANGS (sizeof(langs) / sizeof(langs[0]))

size_t hl_lang_count(void)
{
    return NLANGS;
}

const struct hl_lang *hl_lang_at(size_t i)
{
    return i < NLANGS ? &langs[i] : NULL;
}

const char *hl_lang_name(const struct hl_lang *l)
{
    return l->name;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Is the word w[0..n) (already lower-cased) in the space-separated list? */
static int in_list(const char *list, const char *w, size_t n)
{
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && memcmp(p, w, n) == 0)
            return 1;
        p += k;
        while (*p == ' ')
            p++;
    }
    return 0;
}

const struct hl_lang *hl_lang_find(const char *s, size_t n)
{
    char w[32];
    size_t k = 0;
    while (k < n && s[k] != ' ' && s[k] != '\t' && s[k] != '{' && s[k] != ',' && s[k] != ':') {
        if (k == sizeof(w))
            return NULL;
        w[k] = (char)lower((unsigned char)s[k]);
        k++;
    }
    if (k == 0)
        return NULL;
    if (k > 9 && memcmp(w, "language-", 9) == 0) { /* ```language-python (HTML class style) */
        memmove(w, w + 9, k - 9);
        k -= 9;
    }
    for (size_t i = 0; i < NLANGS; i++)
        if (in_list(langs[i].aliases, w, k))
            return &langs[i];
    return NULL;
}

/* ---- compiled tables ---- */

#define HL_TAB 512 /* a power of two, over twice the largest language's word count */
#define HL_WORD_MAX 31
#define HL_OPEN_MAX 8 /* hl_scan searches 16 bytes at a time for up to this many openers */

enum { A_NONE, A_IDENT, A_DIGIT, A_QUOTE, A_MAYBE };

/* What comes after a keyword: the next word is a function or a type. */
enum { AFTER_NONE, AFTER_FUNC, AFTER_TYPE };

struct hl_kw {
    const char *w;
    uint8_t len;
    uint8_t slot; /* 0: empty */
    uint8_t after;
};

struct hl {
    const struct hl_lang *l;
    uint8_t act[256];   /* A_*: what a byte may start */
    uint8_t ident[256]; /* bytes inside a word */
    unsigned nopen;     /* bytes that may open a region (act A_QUOTE or A_MAYBE) */
#ifdef __SSE2__
    __m128i open[8];    /* the first 8 of them, each in all 16 lanes (hl_scan's search) */
#endif
    uint32_t lens[256]; /* bit k: a listed word of length k starts with this byte (any case) */
    struct hl_kw tab[HL_TAB];
};

/* A cheap hash of a word (len >= 1): its length and first, second and last bytes. */
static unsigned word_hash(const char *w, size_t n)
{
    unsigned a = (unsigned char)w[0], b = (unsigned char)w[n > 1], c = (unsigned char)w[n - 1];
    return (a * 131u + b * 31u + c * 7u + (unsigned)n * 113u) * 2654435761u >> 7;
}

static void tab_add(struct hl *h, const char *list, int slot, int after)
{
    if (!list)
        return;
    for (const char *p = list; *p;) {
        while (*p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        size_t n = (size_t)(e - p);
        if (n && n <= HL_WORD_MAX) {
            unsigned i = word_hash(p, n) & (HL_TAB - 1);
            while (h->tab[i].slot && !(h->tab[i].len == n && memcmp(h->tab[i].w, p, n) == 0))
                i = (i + 1) & (HL_TAB - 1);
            h->lens[(unsigned char)p[0]] |= 1u << n;
            h->lens[lower((unsigned char)p[0]) ^ 0x20] |= 1u << n; /* either case (F_CASEI) */
            if (!h->tab[i].slot) /* the first list naming a word wins */
                h->tab[i] = (struct hl_kw){p, (uint8_t)n, (uint8_t)slot, (uint8_t)after};
            else if (after)
                h->tab[i].after = (uint8_t)after;
        }
        p = e;
    }
}

static void mark_start(struct hl *h, const char *s)
{
    if (s && *s && h->act[(unsigned char)*s] == A_NONE)
        h->act[(unsigned char)*s] = A_MAYBE;
}

struct hl *hl_new(const struct hl_lang *l)
{
    struct hl *h = xcalloc(1, sizeof(*h));
    h->l = l;
    unsigned f = l->flags;
    for (int c = 0; c < 256; c++) {
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
        h->ident[c] = (uint8_t)(alpha || (c >= '0' && c <= '9') ||
                                (c == '-' && (f & F_DASHID)) ||
                                (c == '$' && (f & F_DOLLARID)));
        h->act[c] = alpha || (c == '$' && (f & F_DOLLARID)) ? A_IDENT
                  : c >= '0' && c <= '9'                     ? A_DIGIT
                                                             : A_NONE;
    }
    if (f & F_DQ)
        h->act['"'] = A_QUOTE;
    if (f & (F_SQ | F_LIFETIME))
        h->act['\''] = A_QUOTE;
    if (f & F_BQ)
        h->act['`'] = A_QUOTE;
    mark_start(h, l->lc1);
    mark_start(h, l->lc2);
    mark_start(h, l->bc_open);
    if (f & (F_HASHPP | F_HEXCOLOR | F_HASHATTR))
        h->act['#'] = A_MAYBE;
    if (f & F_AT)
        h->act['@'] = A_MAYBE;
    if (f & F_DOLLAR)
        h->act['$'] = A_MAYBE;
    if (f & F_PHPTAG) {
        h->act['<'] = A_MAYBE;
        h->act['?'] = A_MAYBE;
    }
    if (f & F_RUBYDOC)
        h->act['='] = A_MAYBE;
    if (f & F_LUALONG)
        h->act['['] = A_MAYBE;
    if (f & F_SECTION)
        h->act['['] = A_MAYBE;
    if (l->kind == K_CODE && (f & F_DQ) == 0 && (f & F_SQ) == 0)
        h->act['"'] = A_NONE;
    for (int c = 0; c < 256; c++) {
        if (h->act[c] < A_QUOTE)
            continue;
#ifdef __SSE2__
        if (h->nopen < HL_OPEN_MAX)
            h->open[h->nopen] = _mm_set1_epi8((char)c);
#endif
        h->nopen++;
    }
    tab_add(h, l->defs, THEME_CODE_KEYWORD, AFTER_FUNC);
    tab_add(h, l->typedefs, THEME_CODE_KEYWORD, AFTER_TYPE);
    tab_add(h, l->keywords, THEME_CODE_KEYWORD, AFTER_NONE);
    tab_add(h, l->types, THEME_CODE_TYPE, AFTER_NONE);
    tab_add(h, l->consts, THEME_CODE_NUMBER, AFTER_NONE);
    tab_add(h, l->builtins, THEME_CODE_FUNCTION, AFTER_NONE);
    return h;
}

const struct hl_lang *hl_of(const struct hl *h)
{
    return h->l;
}

void hl_free(struct hl *h)
{
    free(h);
}

void hl_spans_free(struct hl_spans *o)
{
    free(o->v);
    memset(o, 0, sizeof(*o));
}

static const struct hl_kw *lookup(const struct hl *h, const char *w, size_t n)
{
    char low[HL_WORD_MAX];
    if (n == 0 || n > HL_WORD_MAX || !(h->lens[(unsigned char)w[0]] >> n & 1))
        return NULL; /* no listed word has this first byte and length: most names */
    if (h->l->flags & F_CASEI) {
        for (size_t i = 0; i < n; i++)
            low[i] = (char)lower((unsigned char)w[i]);
        w = low;
    }
    unsigned i = word_hash(w, n) & (HL_TAB - 1);
    while (h->tab[i].slot) {
        if (h->tab[i].len == n && h->tab[i].w[0] == w[0] && memcmp(h->tab[i].w, w, n) == 0)
            return &h->tab[i];
        i = (i + 1) & (HL_TAB - 1);
    }
    return NULL;
}

/* ---- output ---- */

struct out {
    struct hl_spans *o;
    size_t at; /* bytes before this are covered */
    int emit;  /* 0: hl_scan, the state only (no spans) */
};

#if defined(__GNUC__)
#define HL_INLINE inline __attribute__((always_inline))
#else
#define HL_INLINE inline
#endif

static HL_INLINE void span_add(struct hl_spans *o, size_t a, size_t b, int slot)
{
    if (o->n && o->v[o->n - 1].slot == slot) {
        o->v[o->n - 1].len += (uint32_t)(b - a);
        return;
    }
    if (o->n == o->cap)
        XGROW(o->v, o->n + 1, o->cap);
    o->v[o->n++] = (struct theme_span){(uint32_t)a, (uint32_t)(b - a), (uint16_t)slot, 0};
}

/* Bytes [a, b) in slot; the gap since the last span in plain code. */
static HL_INLINE void put(struct out *w, size_t a, size_t b, int slot)
{
    if (!w->emit)
        return;
    if (a < w->at)
        a = w->at;
    if (a > w->at)
        span_add(w->o, w->at, a, THEME_CODE);
    if (b > a) {
        span_add(w->o, a, b, slot);
        w->at = b;
    } else if (a > w->at) {
        w->at = a;
    }
}

/* ---- regions carried over lines ---- */

enum { M_NONE, M_COMMENT, M_STRING, M_TAG };

static int at(const char *s, size_t n, size_t i, const char *w)
{
    size_t k = strlen(w);
    return k && i + k <= n && memcmp(s + i, w, k) == 0;
}

static void open_region(struct hl_state *st, int mode, const char *close, size_t k, int esc)
{
    if (k > sizeof(st->close))
        k = sizeof(st->close);
    st->mode = (uint8_t)mode;
    st->esc = (uint8_t)esc;
    st->nclose = (uint8_t)k;
    memcpy(st->close, close, k);
    st->depth = 1;
}

/* Scan a comment or string from i: the index after its end (the region closes), or n (it
 * goes on; st keeps it open). */
static size_t region_end(const struct hl *h, struct hl_state *st, const char *s, size_t n,
                         size_t i)
{
    const char *open = h->l->bc_open;
    int nest = st->mode == M_COMMENT && (h->l->flags & F_NESTC) && open;
    char c0 = st->close[0], o0 = nest ? open[0] : c0, e0 = st->esc ? '\\' : c0;
    if (!nest) { /* jump from one close[0] to the next; an odd run of \ before it escapes it */
        size_t start = i;
        for (;;) {
            const char *p = i < n ? memchr(s + i, c0, n - i) : NULL;
            if (!p)
                return n;
            size_t k = (size_t)(p - s), b = k;
            while (st->esc && b > start && s[b - 1] == '\\')
                b--;
            if ((k - b) % 2 == 0 && k + st->nclose <= n &&
                memcmp(s + k, st->close, st->nclose) == 0) {
                st->mode = M_NONE;
                return k + st->nclose;
            }
            i = k + 1;
        }
    }
    for (; i < n; i++) {
        char c = s[i];
        if (c != c0 && c != o0 && c != e0)
            continue;
        if (c == '\\' && st->esc) {
            i++;
            continue;
        }
        if (nest && c == open[0] && at(s, n, i, open)) {
            if (st->depth < 255)
                st->depth++;
            i += strlen(open) - 1;
            continue;
        }
        if (c == c0 && i + st->nclose <= n && memcmp(s + i, st->close, st->nclose) == 0) {
            i += st->nclose;
            if (--st->depth == 0 || !nest) {
                st->mode = M_NONE;
                return i;
            }
            i--;
        }
    }
    return n;
}

/* ---- generic code ---- */

static size_t skip_spaces(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

/* A string opening at s[q] (the quote; the token starts at `from`, a prefix such as r or f
 * before it): emit it and return the index after it. */
static size_t code_string(const struct hl *h, struct hl_state *st, struct out *w, const char *s,
                          size_t n, size_t from, size_t q, int raw)
{
    unsigned f = h->l->flags;
    char c = s[q];
    size_t k = 1;
    int ml, esc;
    if ((f & F_TRIPLE) && c != '`' && q + 2 < n && s[q + 1] == c && s[q + 2] == c) {
        k = 3;
        ml = 1;
        esc = !raw;
    } else if (c == '"') {
        ml = (f & F_DQML) != 0;
        esc = !raw;
    } else if (c == '\'') {
        ml = (f & F_SQML) != 0;
        esc = !raw && !(f & F_SQRAW);
    } else {
        ml = (f & F_BQML) != 0;
        esc = !raw && !(f & F_BQRAW);
    }
    char close[3] = {c, c, c};
    open_region(st, M_STRING, close, k, esc);
    size_t e = region_end(h, st, s, n, q + k);
    if (st->mode != M_NONE && !ml)
        st->mode = M_NONE; /* unterminated on one line: ends with it */
    int slot = THEME_CODE_STRING;
    if ((f & F_KEYCOLON) && st->mode == M_NONE) {
        size_t j = skip_spaces(s, n, e);
        if (j < n && s[j] == ':')
            slot = THEME_CODE_TYPE;
    }
    put(w, from, e, slot);
    return e;
}

/* Rust raw string at s[i] ('r' or 'b' 'r'): r"..." r#"..."#; 0 when it is not one. */
static size_t rust_raw(const struct hl *h, struct hl_state *st, struct out *w, const char *s,
                       size_t n, size_t i)
{
    size_t j = i + (s[i] == 'b' ? 1 : 0);
    if (j >= n || s[j] != 'r')
        return 0;
    j++;
    size_t hashes = 0;
    while (j < n && s[j] == '#')
        hashes++, j++;
    if (j >= n || s[j] != '"' || hashes + 1 > sizeof(st->close))
        return 0;
    char close[sizeof(st->close)];
    close[0] = '"';
    memset(close + 1, '#', hashes);
    open_region(st, M_STRING, close, hashes + 1, 0);
    size_t e = region_end(h, st, s, n, j + 1);
    put(w, i, e, THEME_CODE_STRING);
    return e;
}

/* The character after s[i..] skipping spaces is c (and, for ':', a space or the end after). */
static int next_is(const char *s, size_t n, size_t i, char c)
{
    i = skip_spaces(s, n, i);
    if (i >= n || s[i] != c)
        return 0;
    if (c == ':')
        return i + 1 == n || s[i + 1] == ' ' || s[i + 1] == '\t';
    if (c == '=')
        return i + 1 == n || s[i + 1] != '=';
    return 1;
}

/* An assignment follows s[i..]: =, :=, ::=, ?=, += or != (make), not ==. */
static int assigns(const char *s, size_t n, size_t i)
{
    i = skip_spaces(s, n, i);
    while (i < n && (s[i] == ':' || s[i] == '?' || s[i] == '+' || s[i] == '!') && i + 1 < n &&
           (s[i + 1] == '=' || s[i + 1] == ':'))
        i++;
    return next_is(s, n, i, '=');
}

static int is_upper(char c)
{
    return c >= 'A' && c <= 'Z';
}

static int has_lower(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 'a' && s[i] <= 'z')
            return 1;
    return 0;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static size_t number_end(const char *s, size_t n, size_t i)
{
    int hex = i + 1 < n && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X');
    size_t j = i + 1;
    while (j < n) {
        char c = s[j];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '_' || c == '\'') {
            if (c == '\'' && !(j + 1 < n && s[j + 1] >= '0' && s[j + 1] <= '9'))
                break; /* C++ 1'000 digit separators only */
            j++;
        } else if (c == '.' && !(j + 1 < n && s[j + 1] == '.')) {
            j++;
        } else if ((c == '+' || c == '-') && !hex && (s[j - 1] == 'e' || s[j - 1] == 'E')) {
            j++;
        } else {
            break;
        }
    }
    return j;
}

/* A word at s[i..j): its slot, or -1 for plain code. *after carries keyword context. */
static int word_slot(const struct hl *h, const char *s, size_t n, size_t i, size_t j,
                     int first, int *after)
{
    unsigned f = h->l->flags;
    int pending = *after;
    *after = AFTER_NONE;
    const struct hl_kw *k = lookup(h, s + i, j - i);
    if (k && (!(f & F_FIRSTWORD) || first) && k->slot == THEME_CODE_KEYWORD) {
        *after = k->after;
        return THEME_CODE_KEYWORD;
    }
    if (pending == AFTER_FUNC)
        return THEME_CODE_FUNCTION;
    if (pending == AFTER_TYPE)
        return THEME_CODE_TYPE;
    if (first && (f & F_KEYEQ) && assigns(s, n, j))
        return THEME_CODE_TYPE;
    if (first && (f & F_TARGET) && next_is(s, n, j, ':'))
        return THEME_CODE_FUNCTION;
    if (first && (f & F_TARGET) && j < n && s[j] == ':' && !(j + 1 < n && s[j + 1] == '='))
        return THEME_CODE_FUNCTION;
    if ((f & F_KEYCOLON) && next_is(s, n, j, ':'))
        return THEME_CODE_TYPE;
    if (k && !(f & F_FIRSTWORD))
        return k->slot;
    if (j < n && s[j] == '(' && !(f & F_NOFUNC))
        return THEME_CODE_FUNCTION;
    if ((f & F_CAPTYPE) && is_upper(s[i]) && has_lower(s + i, j - i))
        return THEME_CODE_TYPE;
    return -1;
}

/* $name, ${...}, $(, $1, $@ ... at s[i] == '$': the index after it (i + 1 when nothing). */
static size_t dollar_end(const struct hl *h, const char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    if (j >= n)
        return j;
    if (s[j] == '{') {
        const char *e = memchr(s + j, '}', n - j);
        return e ? (size_t)(e - s) + 1 : n;
    }
    if (s[j] == '(') { /* make's $(VAR) is a variable; the shell's $(cmd) runs a command */
        const char *e = h->l->flags & F_TARGET ? memchr(s + j, ')', n - j) : NULL;
        return e ? (size_t)(e - s) + 1 : j + 1;
    }
    if (s[j] && strchr("0123456789@*#?$!-^<", s[j]))
        return j + 1;
    while (j < n && h->ident[(unsigned char)s[j]] && s[j] != '-')
        j++;
    return j;
}

/* One line of generic code; emit is a constant of each caller (code_line, code_scan): without
 * it the same scan keeps only the state (no word's slot is looked up, no span is made). */
static HL_INLINE void code_line_k(const struct hl *h, struct hl_state *st, struct out *w,
                                  const char *s, size_t n, const int emit)
{
    const struct hl_lang *l = h->l;
    unsigned f = l->flags;
    size_t i = 0;
    if (st->mode == M_COMMENT || st->mode == M_STRING) {
        int slot = st->mode == M_COMMENT ? THEME_CODE_COMMENT : THEME_CODE_STRING;
        if ((f & F_RUBYDOC) && st->mode == M_COMMENT) {
            if (at(s, n, 0, "=end"))
                st->mode = M_NONE;
            put(w, 0, n, THEME_CODE_COMMENT);
            return;
        }
        i = region_end(h, st, s, n, 0);
        put(w, 0, i, slot);
    }
    int first = 1, after = AFTER_NONE;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        switch (h->act[c]) {
        case A_NONE: /* spaces and punctuation that start nothing: skip the run */
            do {
                if (c != ' ' && c != '\t')
                    first = 0;
                if (++i == n)
                    break;
                c = (unsigned char)s[i];
            } while (h->act[c] == A_NONE);
            continue;
        case A_IDENT: {
            size_t j = i + 1;
            while (j < n && h->ident[(unsigned char)s[j]])
                j++;
            if ((f & F_RAWSTR) && j - i <= 2 && (s[i] == 'r' || s[i] == 'b')) {
                size_t e = rust_raw(h, st, w, s, n, i);
                if (e) {
                    i = e;
                    first = 0;
                    continue;
                }
            }
            if (j < n && (s[j] == '"' || s[j] == '\'') && h->act[(unsigned char)s[j]] ==
                A_QUOTE && j - i <= 2 && strchr("rRbBfFuUL", s[i]) &&
                (j - i == 1 || strchr("rRbBfFuU8", s[i + 1]))) {
                int raw = s[i] == 'r' || s[i] == 'R' || (j - i == 2 && (s[i + 1] == 'r' ||
                                                                       s[i + 1] == 'R'));
                i = code_string(h, st, w, s, n, i, j, raw && !(f & F_HASHPP));
                first = 0;
                continue;
            }
            if ((f & F_MACRO) && j < n && s[j] == '!' && !(j + 1 < n && s[j + 1] == '=')) {
                put(w, i, j + 1, THEME_CODE_PREPROC);
                i = j + 1;
                first = 0;
                continue;
            }
            if (emit) {
                int slot = word_slot(h, s, n, i, j, first, &after);
                if (slot >= 0)
                    put(w, i, j, slot);
            }
            i = j;
            first = 0;
            continue;
        }
        case A_DIGIT: {
            size_t j = number_end(s, n, i);
            put(w, i, j, THEME_CODE_NUMBER);
            i = j;
            first = 0;
            continue;
        }
        case A_QUOTE:
            if (c == '\'' && (f & F_LIFETIME) && i + 1 < n && h->ident[(unsigned char)s[i + 1]] &&
                !(i + 2 < n && s[i + 2] == '\'') && s[i + 1] != '\\') {
                size_t j = i + 1;
                while (j < n && h->ident[(unsigned char)s[j]])
                    j++;
                put(w, i, j, THEME_CODE_TYPE);
                i = j;
            } else if (c == '\'' && !(f & F_SQ)) {
                i++;
            } else {
                i = code_string(h, st, w, s, n, i, i, 0);
            }
            first = 0;
            continue;
        default:
            break;
        }
        /* A_MAYBE: comments and the special characters of this language */
        if (l->bc_open && at(s, n, i, l->bc_open)) {
            open_region(st, M_COMMENT, l->bc_close, strlen(l->bc_close), 0);
            size_t e = region_end(h, st, s, n, i + strlen(l->bc_open));
            put(w, i, e, THEME_CODE_COMMENT);
            i = e;
            first = 0;
            continue;
        }
        if ((l->lc1 && at(s, n, i, l->lc1)) || (l->lc2 && at(s, n, i, l->lc2))) {
            if (!(f & F_SHCOMMENT) || i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t') {
                put(w, i, n, THEME_CODE_COMMENT);
                return;
            }
        }
        if (c == '#' && (f & F_HASHPP) && first) {
            put(w, i, n, THEME_CODE_PREPROC);
            return;
        }
        if (c == '#' && (f & F_HASHATTR) && i + 1 < n && (s[i + 1] == '[' || s[i + 1] == '!')) {
            const char *e = memchr(s + i, ']', n - i);
            size_t j = e ? (size_t)(e - s) + 1 : n;
            put(w, i, j, THEME_CODE_PREPROC);
            i = j;
            first = 0;
            continue;
        }
        if (c == '#' && (f & F_HEXCOLOR) && i + 1 < n && is_hex(s[i + 1])) {
            size_t j = i + 1;
            while (j < n && h->ident[(unsigned char)s[j]])
                j++;
            put(w, i, j, THEME_CODE_NUMBER);
            i = j;
            first = 0;
            continue;
        }
        if (c == '@' && (f & F_AT) && i + 1 < n && h->act[(unsigned char)s[i + 1]] == A_IDENT) {
            size_t j = i + 1;
            while (j < n && (h->ident[(unsigned char)s[j]] || s[j] == '.'))
                j++;
            put(w, i, j, THEME_CODE_PREPROC);
            i = j;
            first = 0;
            continue;
        }
        if (c == '$' && (f & F_DOLLAR)) {
            size_t j = dollar_end(h, s, n, i);
            if (j > i + 1)
                put(w, i, j, THEME_CODE_PREPROC);
            i = j;
            first = 0;
            continue;
        }
        if ((f & F_PHPTAG) && (at(s, n, i, "<?php") || at(s, n, i, "?>") || at(s, n, i, "<?="))) {
            size_t j = i + (s[i] == '?' ? 2 : s[i + 2] == '=' ? 3 : 5);
            put(w, i, j, THEME_CODE_PREPROC);
            i = j;
            continue;
        }
        if ((f & F_RUBYDOC) && i == 0 && at(s, n, 0, "=begin")) {
            st->mode = M_COMMENT;
            put(w, 0, n, THEME_CODE_COMMENT);
            return;
        }
        if (c == '[' && (f & F_LUALONG) && i + 1 < n && s[i + 1] == '[') {
            open_region(st, M_STRING, "]]", 2, 0);
            size_t e = region_end(h, st, s, n, i + 2);
            put(w, i, e, THEME_CODE_STRING);
            i = e;
            first = 0;
            continue;
        }
        if (c == '[' && (f & F_SECTION) && first) {
            const char *e = memchr(s + i, ']', n - i);
            size_t j = e ? (size_t)(e - s) + 1 : n;
            if (j < n && s[j] == ']')
                j++; /* [[array of tables]] */
            put(w, i, j, THEME_CODE_KEYWORD);
            i = j;
            first = 0;
            continue;
        }
        if (c != ' ' && c != '\t')
            first = 0;
        i++;
    }
}

static void code_line(const struct hl *h, struct hl_state *st, struct out *w, const char *s,
                      size_t n)
{
    code_line_k(h, st, w, s, n, 1);
}

#ifdef __SSE2__
/* 1 when the 16 bytes at p hold one of h's openers. */
static inline int opens16(const struct hl *h, const char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m = _mm_cmpeq_epi8(v, h->open[0]);
    for (unsigned k = 1; k < h->nopen; k++)
        m = _mm_or_si128(m, _mm_cmpeq_epi8(v, h->open[k]));
    return _mm_movemask_epi8(m) != 0;
}
#endif

/* 1 when s[0..n) holds a byte that may open a comment, a string or a tag. */
static int may_open(const struct hl *h, const char *s, size_t n)
{
#ifdef __SSE2__
    if (n >= 16 && h->nopen > 0 && h->nopen <= HL_OPEN_MAX) {
        size_t i = 0;
        for (; n - i >= 16; i += 16)
            if (opens16(h, s + i))
                return 1;
        return i < n && opens16(h, s + n - 16); /* the tail: the last 16 bytes again */
    }
#endif
    for (size_t i = 0; i < n; i++)
        if (h->act[(unsigned char)s[i]] >= A_QUOTE)
            return 1;
    return 0;
}

static void code_scan(const struct hl *h, struct hl_state *st, struct out *w, const char *s,
                      size_t n)
{
    if (st->mode == M_NONE && !may_open(h, s, n))
        return; /* nothing opens a region without a byte that may start one */
    code_line_k(h, st, w, s, n, 0);
}

/* ---- diff ---- */

static void diff_line(struct out *w, const char *s, size_t n)
{
    int slot = -1;
    if (at(s, n, 0, "+++") || at(s, n, 0, "---") || at(s, n, 0, "diff ") ||
        at(s, n, 0, "index ") || at(s, n, 0, "new file") || at(s, n, 0, "deleted file") ||
        at(s, n, 0, "similarity") || at(s, n, 0, "rename "))
        slot = THEME_CODE_KEYWORD;
    else if (at(s, n, 0, "@@"))
        slot = THEME_CODE_PREPROC;
    else if (n && (s[0] == '+' || s[0] == '>'))
        slot = THEME_CODE_ADDED;
    else if (n && (s[0] == '-' || s[0] == '<'))
        slot = THEME_CODE_REMOVED;
    else if (n && s[0] == '\\')
        slot = THEME_CODE_COMMENT;
    if (slot >= 0)
        put(w, 0, n, slot);
}

/* ---- HTML and XML ---- */

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == ':' || c == '.' || (unsigned char)c >= 0x80;
}

/* Index of the first c in s[i..n), or n. */
static size_t find(const char *s, size_t n, size_t i, char c)
{
    const char *p = i < n ? memchr(s + i, c, n - i) : NULL;
    return p ? (size_t)(p - s) : n;
}

static void markup_line(const struct hl *h, struct hl_state *st, struct out *w, const char *s,
                        size_t n)
{
    size_t i = 0, next_lt = 0, next_amp = 0;
    int searched = 0;
    while (i < n) {
        if (st->mode == M_COMMENT || st->mode == M_STRING) {
            int slot = st->mode == M_COMMENT ? THEME_CODE_COMMENT : THEME_CODE_STRING;
            int was_string = st->mode == M_STRING;
            size_t e = region_end(h, st, s, n, i);
            put(w, i, e, slot);
            i = e;
            if (was_string && st->mode == M_NONE)
                st->mode = M_TAG; /* an attribute value ended inside its tag */
            continue;
        }
        if (st->mode == M_TAG) {
            char c = s[i];
            if (c == '>' || (c == '/' && i + 1 < n && s[i + 1] == '>') ||
                (c == '?' && i + 1 < n && s[i + 1] == '>')) {
                size_t j = c == '>' ? i + 1 : i + 2;
                put(w, i, j, THEME_CODE_KEYWORD);
                st->mode = M_NONE;
                i = j;
            } else if (c == '"' || c == '\'') {
                open_region(st, M_STRING, &s[i], 1, 0);
                size_t e = region_end(h, st, s, n, i + 1);
                put(w, i, e, THEME_CODE_STRING);
                i = e;
                if (st->mode == M_NONE)
                    st->mode = M_TAG;
            } else if (name_char(c)) {
                size_t j = i + 1;
                while (j < n && name_char(s[j]))
                    j++;
                put(w, i, j, THEME_CODE_TYPE);
                i = j;
            } else {
                i++;
            }
            continue;
        }
        if (!searched || next_lt < i) /* the next '<' and '&': searched again once passed */
            next_lt = find(s, n, i, '<');
        if (!searched || next_amp < i)
            next_amp = find(s, n, i, '&');
        searched = 1;
        size_t a = next_lt, b = next_amp;
        if (b < a) { /* an entity: &amp; &#39; */
            size_t j = b + 1;
            while (j < n && j < b + 12 && (name_char(s[j]) || s[j] == '#'))
                j++;
            if (j < n && s[j] == ';' && j > b + 1)
                put(w, b, j + 1, THEME_CODE_NUMBER);
            i = j;
            continue;
        }
        if (a == n)
            break;
        if (at(s, n, a, "<!--")) {
            open_region(st, M_COMMENT, "-->", 3, 0);
            size_t e = region_end(h, st, s, n, a + 4);
            put(w, a, e, THEME_CODE_COMMENT);
            i = e;
            continue;
        }
        size_t j = a + 1;
        if (j < n && (s[j] == '/' || s[j] == '!' || s[j] == '?'))
            j++;
        if (j < n && name_char(s[j])) {
            int pp = s[a + 1] == '!' || s[a + 1] == '?';
            while (j < n && name_char(s[j]))
                j++;
            put(w, a, j, pp ? THEME_CODE_PREPROC : THEME_CODE_KEYWORD);
            st->mode = M_TAG;
            i = j;
            continue;
        }
        i = a + 1;
    }
}

/* ---- Markdown ---- */

static void markdown_code_line(struct hl_state *st, struct out *w, const char *s, size_t n)
{
    size_t i = skip_spaces(s, n, 0);
    if (at(s, n, i, "```") || at(s, n, i, "~~~")) {
        st->mode = st->mode == M_STRING ? M_NONE : M_STRING; /* a fence inside the block */
        put(w, i, n, THEME_CODE_PREPROC);
        return;
    }
    if (st->mode == M_STRING) {
        put(w, 0, n, THEME_CODE_STRING);
        return;
    }
    if (i < n && s[i] == '#') {
        put(w, i, n, THEME_CODE_KEYWORD);
        return;
    }
    if (i < n && s[i] == '>') {
        put(w, i, n, THEME_CODE_COMMENT);
        return;
    }
    if (i + 1 < n && (s[i] == '-' || s[i] == '*' || s[i] == '+') && s[i + 1] == ' ') {
        put(w, i, i + 1, THEME_CODE_KEYWORD);
        i += 2;
    } else if (i < n && s[i] >= '0' && s[i] <= '9') {
        size_t j = i;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++;
        if (j < n && (s[j] == '.' || s[j] == ')') && (j + 1 == n || s[j + 1] == ' ')) {
            put(w, i, j + 1, THEME_CODE_KEYWORD);
            i = j + 1;
        }
    }
    size_t a = find(s, n, i, '`'), b = find(s, n, i, '['); /* searched again once passed */
    while (i < n) {
        if (a < i)
            a = find(s, n, i, '`');
        if (b < i)
            b = find(s, n, i, '[');
        if (a < b) {
            size_t j = find(s, n, a + 1, '`');
            j = j < n ? j + 1 : n;
            put(w, a, j, THEME_CODE_STRING);
            i = j;
        } else if (b < n) { /* [text](url): the url in the function slot */
            size_t j = find(s, n, b, ']');
            j = j < n ? j + 1 : n;
            if (j < n && s[j] == '(') {
                size_t k = find(s, n, j, ')');
                k = k < n ? k + 1 : n;
                put(w, j, k, THEME_CODE_FUNCTION);
                j = k;
            }
            i = j > b ? j : b + 1;
        } else {
            break;
        }
    }
}

static void hl_run(const struct hl *h, struct hl_state *st, const char *s, size_t n,
                   struct out *w)
{
    switch (h->l->kind) {
    case K_DIFF:
        diff_line(w, s, n);
        break;
    case K_MARKUP:
        markup_line(h, st, w, s, n);
        break;
    case K_MARKDOWN:
        markdown_code_line(st, w, s, n);
        break;
    default:
        if (w->emit)
            code_line(h, st, w, s, n);
        else
            code_scan(h, st, w, s, n);
        break;
    }
    /* Inside nothing, the rest (the close of the last string or comment) is never read again:
     * cleared, a line that starts the same way has the same state (wrap.c keeps only the
     * lines whose state is not the initial one: with it left, nearly every line after a
     * string's). */
    if (st->mode == M_NONE)
        *st = (struct hl_state)HL_STATE_INIT;
}

void hl_line(const struct hl *h, struct hl_state *st, const char *s, size_t n,
             struct hl_spans *out)
{
    struct out w = {out, 0, 1};
    out->n = 0;
    hl_run(h, st, s, n, &w);
    put(&w, n, n, THEME_CODE);
}

void hl_scan(const struct hl *h, struct hl_state *st, const char *s, size_t n)
{
    struct out w = {NULL, 0, 0};
    hl_run(h, st, s, n, &w);
}
