/* balloonmgr agent [--policy FILE] [--listen ADDR:PORT] [--web-config FILE] [--state FILE]
 * [--proc DIR]: policy passes every interval plus /metrics (TLS and basic auth from the web
 * config), keeping the timer's state file. This is the verb: its options and help; the
 * running agent is agent.c. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "agent.h"
#include "cli.h"
#include "error.h"
#include "http.h"
#include "state.h"

#define DEFAULT_POLICY BM_POLICY_DEFAULT_PATH /* config.h: SYSCONFDIR/balloonmgr/... */
/* what the completion offers for --listen */
#define LISTEN_WORDS "127.0.0.1:9736 localhost:9736 [::1]:9736 0.0.0.0:9736 :9736 127.0.0.1:0"

static const BmOptDef options[] = {
    BM_OPTDEF_POLICY("policy file (default below; built-in if absent)"),
    {'l', "listen", 'l', " ADDR:PORT",
     "serve /metrics there (" BM_HTTP_DEFAULT_LISTEN "; :PORT every\n"
     "address); alias --web.listen-address",
     BM_COMPLETE_WORDS, LISTEN_WORDS},
    {0, "web.listen-address", 'l', " ADDR:PORT", NULL, BM_COMPLETE_WORDS, LISTEN_WORDS},
    {0, "no-libvirt-duplicates", 'D', NULL, "leave out what libvirt exporters export",
     BM_COMPLETE_NONE, NULL},
    {0, "web-config", 'W', " FILE",
     "TLS and basic auth (exporter-toolkit's YAML);\nalias --web.config.file",
     BM_COMPLETE_FILE, NULL},
    {0, "web.config.file", 'W', " FILE", NULL, BM_COMPLETE_FILE, NULL},
    BM_OPTDEF_STATE("state file (default below; the timer's too), locked"),
    BM_OPTDEF_PROC("read host memory from DIR instead of /proc"),
    BM_OPTDEF_DRY_RUN("decide and export, change nothing"),
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nSIGHUP reloads the policy and the web config; SIGTERM, SIGINT stop.\n"
    "Policy: " DEFAULT_POLICY "\n"
    "State:  " BM_STATE_DEFAULT_PATH "\n";

/* The options. Returns 0 to go on, 1 after printing --help, or -EINVAL with the detail. */
static int parse_options(BmGlobal *g, int argc, char **argv, BmAgentOptions *o)
{
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_agent, argc, argv)) != -1) {
        switch (c) {
        case BM_OPT_POLICY: o->policy_path = optarg; o->policy_explicit = true; break;
        case 'l': o->listen = optarg; break;
        case 'W': o->web_config = optarg; break;
        case BM_OPT_STATE: o->state_path = optarg; o->state_explicit = true; break;
        case BM_OPT_PROC: o->proc_dir = optarg; break;
        case BM_OPT_DRY_RUN: o->dry_run = true; break;
        case 'D': o->no_libvirt_duplicates = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_agent, stdout); return 1;
        default: return -EINVAL; /* bm_cli_getopt() stored why */
        }
    }
    if (optind < argc)
        return bm_error(-EINVAL, "unexpected argument '%s'", argv[optind]);
    return 0;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    BmAgentOptions o = {.policy_path = DEFAULT_POLICY, .listen = BM_HTTP_DEFAULT_LISTEN,
                        .state_path = BM_STATE_DEFAULT_PATH, .proc_dir = g->proc_dir};
    int r = parse_options(g, argc, argv, &o);
    if (r != 0)
        return r > 0 ? BM_EXIT_OK : bm_report_failure("agent", NULL, r);
    o.uri = g->uri;
    o.monitor_only = g->readonly; /* -r also after the verb */
    return bm_agent_run(&o);
}

const BmVerb bm_verb_agent = {
    .name = "agent",
    .options = options,
    .help_column = 27,
    .help_after = help_after,
    .reads_host = true,
    .run = run,
    .synopsis = "agent [--policy FILE] [--listen ADDR:PORT] [--web-config FILE]\n"
                "       [--state FILE] [--proc DIR] [--dry-run] [--no-libvirt-duplicates]",
    .summary = "Run the policy loop and serve Prometheus metrics on /metrics (latency by SG,\n"
               "reclaimed memory, domain and host memory, the agent's health).",
    .brief = "the policy loop and /metrics (the service)",
};
