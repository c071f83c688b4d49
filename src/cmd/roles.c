/* roles.c - tokterm roles. */
#include "config.h"
#include "cmd/roles.h"
#include "core/conf.h"
#include "core/role.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_roles(const char *cfgpath, int json, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) { /* argv[0] is "roles" */
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs("usage: tokterm roles [--json]\n"
                  "Lists the roles --role and /role know: your roles/NAME.md files, the\n"
                  "[role NAME] sections of the config file and the built-ins, each with where it\n"
                  "comes from and the first line of its prompt.\n",
                  stdout);
            return 0;
        } else {
            fprintf(stderr, "tokterm: roles takes only --json, not '%s'\n", argv[i]);
            return 2;
        }
    }
    const char **src = NULL;
    char **v = role_names(cfgpath, &src);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    int code = 0;
    for (size_t i = 0; v[i]; i++) {
        struct role r;
        struct buf err = BUF_INIT, first = BUF_INIT;
        int ok = role_load(&r, v[i], cfgpath, &err) == 0;
        if (ok) { /* its values as --role would set them (until 2026-12 "temperature: hot"
                     was listed as a good role, and failed only when used) */
            struct conf scratch;
            conf_defaults(&scratch);
            ok = role_apply(&scratch, &r, &err) == 0;
            conf_free(&scratch);
        }
        if (ok && r.prompt) { /* the prompt's first line, made safe to print */
            size_t n = strcspn(r.prompt, "\n");
            utf8_sanitize(&first, r.prompt, n > 200 ? 200 : n);
        }
        if (!ok) {
            fprintf(stderr, "tokterm: %s\n", buf_str(&err));
            code = 2;
        }
        if (arr) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", v[i]);
            cJSON_AddStringToObject(o, "source", src[i]);
            if (ok)
                cJSON_AddStringToObject(o, "path", r.path);
            cJSON_AddStringToObject(o, "prompt", buf_str(&first));
            cJSON_AddItemToArray(arr, o);
        } else {
            printf("%-12s %-9s %s\n", v[i], src[i], buf_str(&first));
        }
        role_free(&r);
        buf_free(&err);
        buf_free(&first);
    }
    if (arr) {
        char *s = cJSON_PrintUnformatted(arr);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(arr);
    } else if (!v[0]) {
        printf("no roles (write one in $XDG_CONFIG_HOME/tokterm/roles/NAME.md)\n");
    }
    util_strv_free(v);
    free(src);
    return code;
}
