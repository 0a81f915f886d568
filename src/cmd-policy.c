/* balloonmgr policy check FILE...: parse policy files and list every error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "policy.h"

static const char options_help[] = "  -h, --help   show this help (an option anywhere, also after 'check')\n"
                                   "  --           the arguments after it are files, even '-h'\n";

static int run(BmGlobal *g, int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0}};
    int c;
    (void)g;
    /* options anywhere ("policy check -h"); "--" ends them: "policy check -- -h" checks a
     * file named -h */
    while ((c = bm_cli_getopt(g, &bm_verb_policy, argc, argv, "h", opts)) != -1) {
        switch (c) {
        case 'h': bm_verb_usage(&bm_verb_policy, options_help, stdout); return BM_EXIT_OK;
        default: return BM_EXIT_USAGE; /* reported */
        }
    }
    if (optind >= argc || strcmp(argv[optind], "check") != 0) {
        bm_report("policy", NULL, "expected 'check FILE...' (see 'balloonmgr policy --help')");
        return BM_EXIT_USAGE;
    }
    if (optind + 1 >= argc) {
        bm_report("policy check", NULL, "expected at least one FILE");
        return BM_EXIT_USAGE;
    }
    int ret = BM_EXIT_OK;
    for (int i = optind + 1; i < argc; i++) {
        BmPolicy *p = NULL;
        char *errors = NULL;
        if (bm_policy_load(argv[i], &p, &errors) < 0) {
            fputs(errors ? errors : "", stderr);
            ret = BM_EXIT_USAGE;
        } else {
            printf("%s: ok\n", argv[i]);
        }
        bm_policy_free(p);
        free(errors);
    }
    return ret;
}

const BmVerb bm_verb_policy = {
    .name = "policy",
    .run = run,
    .synopsis = "policy check FILE...",
    .summary = "Check policy files (balloonmgr.policy(5)); every error is listed as FILE:LINE:COL.",
};
