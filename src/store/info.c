/* info.c - the store's library and a read-only look at a store file (see info.h). */
#include "config.h"
#include "store/info.h"

#include "store/sqlite_dl.h"

#include <stddef.h>

const char *store_library_version(char **err)
{
    return sqlite_dl_load(err) == 0 ? sqlite3_libversion() : NULL;
}

void store_prefer_large_reads(void)
{
    sqlite_dl_prefer_large_reads();
}
