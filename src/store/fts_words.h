/* fts_words.h - the "tt_words" FTS5 tokenizer: the word index that makes a search for a word
 * of FTS_WORDS_MIN..FTS_WORDS_MAX characters fast.
 *
 * A search term is a substring to find anywhere (store.h). The trigram index finds any
 * substring, but FTS5 then walks the doclist of every trigram of the term, and in chat text
 * most trigrams are in most messages: a two-word query read 14 doclists of 23,000-100,000
 * entries over 100,000 messages. This tokenizer splits text into words as FTS5's unicode61
 * does (letters and digits; folded case, accents kept, so it folds exactly as the trigram
 * tokenizer does) and indexes, at each character of a word that has FTS_WORDS_MIN or more
 * characters left, the next FTS_WORDS_MAX (or fewer) characters, all at the word's position.
 * A term that is one whole word of FTS_WORDS_MIN..FTS_WORDS_MAX characters occurs in a text
 * exactly when some indexed piece starts with it, so the prefix query "term"* finds the same
 * messages as the trigram phrase, reading only the doclists of pieces that start with the
 * term. Queries are tokenised as unicode61 does (no pieces).
 *
 * Random data (a pasted hex or base64 blob) would add one distinct piece per character: a
 * 2 MB blob took 7.4 s and 279 MB to index. A message that looks like one (a word of more
 * than FTS_WORDS_LONG characters, or many words of FTS_WORDS_LONGISH or more: base64, PEM and
 * hex dumps are wrapped in lines of 60-76) is not put in the word index at all (tt_words_long()
 * tells the store) and is searched through the trigram index instead. So is a message of more
 * than about FTS_WORDS_DISTINCT_MAX distinct pieces (a long answer of numbered words, ids,
 * names): FTS5 holds each distinct term of a document in memory until the document ends and
 * sorts them then, so a 3.9 MB answer of 2 million distinct pieces took 270 MB and 9-35 s.
 * A few long words (hashes, keys) are indexed: a piece per character, as the trigram index
 * has. Scripts written without spaces (CJK, Thai, ...: a sentence is one unicode61 word; and
 * Hangul, whose words are short) are left out, and terms in them go to the trigram index,
 * where their doclists are short anyway: a CJK corpus of 5.3 MB made a word index of 56 MB
 * (its trigram index: 20 MB).
 * U+0345 (combining ypogegrammeni) counts as a letter here: unicode61 takes it for a
 * separator, but the trigram tokenizer folds it to iota, and the two must agree. */
#ifndef TT_FTS_WORDS_H
#define TT_FTS_WORDS_H
#include "store/sqlite_dl.h"

#define FTS_WORDS_MIN 5  /* shortest term the word index answers, in characters */
#define FTS_WORDS_MAX 16 /* longest */
#define FTS_WORDS_LONG 256 /* a longer word keeps its message out of the word index */
#define FTS_WORDS_LONGISH 24    /* ... and so do more than FTS_WORDS_LONGISH_MAX words */
#define FTS_WORDS_LONGISH_MAX 32 /* of FTS_WORDS_LONGISH characters or more */
#define FTS_WORDS_DISTINCT_MAX 200000 /* ... and so do more distinct pieces than this */

struct fts_words;

/* Register tt_words on this connection, and the SQL function tt_words_long(text): 1 when the
 * text is left out of the word index (a word of more than FTS_WORDS_LONG characters, more than
 * FTS_WORDS_LONGISH_MAX of FTS_WORDS_LONGISH or more, or more than about
 * FTS_WORDS_DISTINCT_MAX distinct pieces), else 0. The state belongs to the connection
 * (SQLite frees it when the connection closes). NULL when FTS5 or its unicode61 tokenizer is
 * missing. */
struct fts_words *fts_words_register(sqlite3 *db);

/* 1 when term (UTF-8, len bytes) is one unicode61 word, nothing around it, of
 * FTS_WORDS_MIN..FTS_WORDS_MAX characters: the word index finds it. Else 0. */
int fts_words_term(struct fts_words *w, const char *term, int len);

#endif
