/* Writes bash-completion/balloonmgr: the option lists and how each option's argument completes,
 * made from the verbs' option tables (BmVerb.options, bm_cli_global_options), then the
 * hand-written completion (balloonmgr.in, argv[1]) that uses them. Run at build time. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The words a user types for d: "--name", "--name=" (an argument only with '='), both for an
 * optional one; with shorts also "-x". */
static void print_words(const BmOptDef *d, bool shorts, const char **sep)
{
    if (shorts && d->short_name)
        printf("%s-%c", *sep, d->short_name), *sep = " ";
    bool eq = d->arg && (d->arg[0] == '=' || d->arg[0] == '[');
    if (!d->arg || d->arg[0] != '=')
        printf("%s--%s", *sep, d->name), *sep = " ";
    if (eq)
        printf("%s--%s=", *sep, d->name), *sep = " ";
}

/* The case arms of _balloonmgr_arg for the first n options of defs (BM_OPTDEF_END ends them
 * earlier) that take their argument in the next word: "VERB:-x | VERB:--name) echo KIND ;;" */
static void print_arg_cases(const char *verb, const BmOptDef *defs, size_t n)
{
    static const char *const kinds[] = {[BM_COMPLETE_NONE] = "none", [BM_COMPLETE_FILE] = "file",
                                        [BM_COMPLETE_DIR] = "dir", [BM_COMPLETE_WORDS] = "words",
                                        [BM_COMPLETE_LIST] = "list"};
    for (size_t i = 0; i < n && defs[i].name; i++) {
        const BmOptDef *d = &defs[i];
        if (!d->arg || d->arg[0] == '[')
            continue; /* no argument, or only with '=' */
        printf("    ");
        if (d->short_name)
            printf("%s:-%c | ", verb, d->short_name);
        printf("%s:--%s) echo '%s%s%s' ;;\n", verb, d->name, kinds[d->complete],
               d->words ? " " : "", d->words ? d->words : "");
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: generate BALLOONMGR.IN\n");
        return 2;
    }
    const char *sep = "";
    printf("# bash completion for balloonmgr(8)                                  -*- shell-script -*-\n"
           "# Generated at build time by bash-completion/generate.c: the option lists from the\n"
           "# verbs' option tables (src/cmd-*.c, src/cli.c), then bash-completion/balloonmgr.in.\n\n"
           "_balloonmgr_verbs=\"");
    for (size_t i = 0; bm_verbs[i]; i++)
        printf("%s%s", i ? " " : "", bm_verbs[i]->name);
    printf(" help\"\n_balloonmgr_global_opts=\"");
    for (const BmOptDef *d = bm_cli_global_options; d->name; d++)
        print_words(d, true, &sep);
    printf("\"\n\n# _balloonmgr_opts VERB: the verb's options and the global ones it takes after it\n"
           "_balloonmgr_opts()\n{\n    case $1 in\n");
    for (size_t i = 0; bm_verbs[i]; i++) {
        sep = "";
        printf("    %s) echo \"", bm_verbs[i]->name);
        for (const BmOptDef *d = bm_verbs[i]->options; d->name; d++)
            print_words(d, false, &sep);
        for (size_t g = 0; g < 2; g++) /* --connect, --readonly */
            print_words(&bm_cli_global_options[g], false, &sep);
        printf("\" ;;\n");
    }
    printf("    esac\n}\n\n"
           "# _balloonmgr_arg VERB OPTION: how the word after OPTION completes (none, file, dir,\n"
           "# words W..., list W...: comma-separated); nothing when OPTION takes no argument there.\n"
           "# VERB is empty before the verb.\n"
           "_balloonmgr_arg()\n{\n    case $1:$2 in\n");
    print_arg_cases("", bm_cli_global_options, SIZE_MAX);
    for (size_t i = 0; bm_verbs[i]; i++) {
        print_arg_cases(bm_verbs[i]->name, bm_verbs[i]->options, SIZE_MAX);
        print_arg_cases(bm_verbs[i]->name, bm_cli_global_options, 1); /* -c/--connect after it */
    }
    printf("    esac\n}\n\n");
    FILE *in = fopen(argv[1], "r");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        fwrite(buf, 1, n, stdout);
    fclose(in);
    return ferror(stdout) ? 1 : 0;
}
