/* xml_dl.h - libxml2's HTML parser, loaded with dlopen() by the first html_to_text().
 *
 * Private to text/ (tools/check-layers.py, PRIVATE): only text/html.c parses HTML. libxml2
 * brings zlib, liblzma and ICU with it; linking it would map them into every run (`ls`,
 * `--help`, a scripted prompt), so it is loaded the way libcurl and SQLite are
 * (net/curl_dl.h): xml_dl_load() opens the library once per process (thread-safe) and fills a
 * table; each xml*() / html*() function tokterm calls is redirected through it, and one that
 * is not in XML_DL_FUNCS fails to link. */
#ifndef TT_XML_DL_H
#define TT_XML_DL_H

#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#define XML_DL_FUNCS(X)                                                                       \
    X(htmlReadMemory) X(xmlFreeDoc) X(xmlSetGenericErrorFunc) X(xmlSetStructuredErrorFunc)

struct xml_dl {
#define XML_DL_MEMBER(name) __typeof__(name) *dl_##name;
    XML_DL_FUNCS(XML_DL_MEMBER)
#undef XML_DL_MEMBER
};
extern struct xml_dl xml_dl_api;

/* Load the library (only the first call does the work). 0, or -1 with *why (static text that
 * says what to install) when why != NULL. */
int xml_dl_load(const char **why);

#define htmlReadMemory (xml_dl_api.dl_htmlReadMemory)
#define xmlFreeDoc (xml_dl_api.dl_xmlFreeDoc)
#define xmlSetGenericErrorFunc (xml_dl_api.dl_xmlSetGenericErrorFunc)
#define xmlSetStructuredErrorFunc (xml_dl_api.dl_xmlSetStructuredErrorFunc)

#endif
