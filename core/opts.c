/* tl_opts_parse: the table-driven option reader every command shares (contract in core/opts.h). */
#include "opts.h"

#include <stdio.h>
#include <string.h>

#define MAX_OPTS 32

/* The table entry whose name is the first len characters of arg, or NULL. */
static const tl_opt *find_opt(const tl_opt *opts, const char *arg, size_t len)
{
    for (const tl_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, arg, len) == 0) return o;
    return NULL;
}

/* Two entries are one choice when they store to the same place. */
static int same_target(const tl_opt *a, const tl_opt *b)
{
    if (a == b) return 1;
    if (a->kind == TL_OPT_LIST || b->kind == TL_OPT_LIST) return 0;
    return (a->value && a->value == b->value) || (a->flag && a->flag == b->flag);
}

/* TL_EUSAGE when o, or an option that is one choice with it, was given before. */
static int check_once(const tl_opt *opts, const tl_opt *o, const unsigned char *given, const char *cmd)
{
    for (int i = 0; opts[i].name; i++) {
        if (!given[i] || !same_target(&opts[i], o)) continue;
        if (&opts[i] == o) return tl_error(TL_EUSAGE, cmd, "option '%s' given twice", o->name);
        return tl_error(TL_EUSAGE, cmd, "options '%s' and '%s' exclude each other", opts[i].name, o->name);
    }
    return TL_OK;
}

int tl_opts_parse(int argc, char **argv, const tl_opt *opts, const char *cmd, const char **pos, int pos_cap,
                  int *npos)
{
    unsigned char given[MAX_OPTS] = {0};
    int n = 0;
    if (npos) *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            if (n >= pos_cap) return tl_error(TL_EUSAGE, cmd, "unexpected argument '%s'", a);
            pos[n++] = a;
            if (npos) *npos = n;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const tl_opt *o = find_opt(opts, a, len);
        if (!o || o - opts >= MAX_OPTS)
            return tl_error(TL_EUSAGE, cmd, "unknown option '%.*s' (see tilelab %s --help)", (int)len, a, cmd);
        if (o->kind != TL_OPT_LIST && check_once(opts, o, given, cmd)) return TL_EUSAGE;
        given[o - opts] = 1;
        if (o->kind == TL_OPT_FLAG) {
            if (eq) return tl_error(TL_EUSAGE, cmd, "option '%s' takes no value", o->name);
            *o->flag = o->set;
            continue;
        }
        const char *val;
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else return tl_error(TL_EUSAGE, cmd, "option '%s' needs a value", o->name);
        if (!*val) return tl_error(TL_EUSAGE, cmd, "option '%s' has an empty value", o->name);
        if (o->kind == TL_OPT_VALUE) {
            *o->value = val;
        } else {
            if (*o->flag >= o->set) return tl_error(TL_EUSAGE, cmd, "at most %d %s options", o->set, o->name);
            o->value[(*o->flag)++] = val;
        }
    }
    return TL_OK;
}


int tl_wants_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        }
    return 0;
}
