/* balloonmgr agent [--policy FILE] [--listen ADDR:PORT] [--web-config FILE] [--state FILE]
 * [--proc DIR]: policy passes every interval plus /metrics (TLS and basic auth from the web
 * config), keeping the timer's state file. This is the verb: its options and help; the
 * running agent is agent.c. */
#include <getopt.h>
#include <stdio.h>

#include "agent.h"
#include "cli.h"
#include "http.h"
#include "state.h"

#define DEFAULT_POLICY BM_POLICY_DEFAULT_PATH /* config.h: SYSCONFDIR/balloonmgr/... */

static const char options_help[] =
    "  -p, --policy FILE        policy file (default " DEFAULT_POLICY ";\n"
    "                           built-in defaults when that file does not exist)\n"
    "  -l, --listen ADDR:PORT   serve /metrics there (default " BM_HTTP_DEFAULT_LISTEN ");\n"
    "                           ADDR an IPv4 address, [IPv6], or a host name (each of its\n"
    "                           addresses: localhost:9736); :PORT is every address; port 0\n"
    "                           a free port, named in the 'serving' line; alias\n"
    "                           --web.listen-address\n"
    "      --no-libvirt-duplicates\n"
    "                           leave out the per-domain series libvirt exporters export\n"
    "                           too (balloon current, maximum, guest memory statistics,\n"
    "                           RSS, faults, swap): for hosts that run both\n"
    "      --web-config FILE    TLS and basic auth for /metrics: a YAML file in the format of\n"
    "                           Prometheus' exporter-toolkit (tls_server_config,\n"
    "                           basic_auth_users); alias --web.config.file\n"
    "      --state FILE         state file, read at start, saved after every pass and at\n"
    "                           stop (default " BM_STATE_DEFAULT_PATH ", shared with the\n"
    "                           timer's run --once: a host runs one or the other; locked\n"
    "                           through FILE.lock, a second writer exits 4)\n"
    "      --proc DIR           read host memory from DIR instead of /proc (tests)\n"
    "  -n, --dry-run            decide and export, never change a balloon or the state file\n"
    "  -h, --help               show this help\n"
    "\nSignals: SIGHUP reloads the policy and the web config (a bad one is reported, the last\n"
    "good one kept); SIGTERM and SIGINT stop the agent.\n";

/* The options. Returns -1 to go on, or the exit status. */
static int parse_options(BmGlobal *g, int argc, char **argv, BmAgentOptions *o)
{
    static const struct option opts[] = {
        BM_CLI_OPT_POLICY,
        {"listen", required_argument, NULL, 'l'},
        {"web.listen-address", required_argument, NULL, 'l'},
        {"no-libvirt-duplicates", no_argument, NULL, 'D'},
        {"web-config", required_argument, NULL, 'W'},
        {"web.config.file", required_argument, NULL, 'W'},
        BM_CLI_OPT_STATE,
        BM_CLI_OPT_PROC,
        BM_CLI_OPT_DRY_RUN,
        BM_CLI_OPT_HELP,
        {0},
    };
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_agent, argc, argv, "p:l:nh", opts)) != -1) {
        switch (c) {
        case BM_OPT_POLICY: o->policy_path = optarg; o->policy_explicit = true; break;
        case 'l': o->listen = optarg; break;
        case 'W': o->web_config = optarg; break;
        case BM_OPT_STATE: o->state_path = optarg; o->state_explicit = true; break;
        case BM_OPT_PROC: o->proc_dir = optarg; break;
        case BM_OPT_DRY_RUN: o->dry_run = true; break;
        case 'D': o->no_libvirt_duplicates = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_agent, options_help, stdout); return BM_EXIT_OK;
        default: return BM_EXIT_USAGE; /* reported */
        }
    }
    if (optind < argc) {
        bm_report("agent", NULL, "unexpected argument '%s'", argv[optind]);
        return BM_EXIT_USAGE;
    }
    return -1;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    BmAgentOptions o = {.policy_path = DEFAULT_POLICY, .listen = BM_HTTP_DEFAULT_LISTEN,
                        .state_path = BM_STATE_DEFAULT_PATH, .proc_dir = g->proc_dir};
    int ret = parse_options(g, argc, argv, &o);
    if (ret >= 0)
        return ret;
    o.uri = g->uri;
    o.monitor_only = g->readonly; /* -r also after the verb */
    return bm_agent_run(&o);
}

const BmVerb bm_verb_agent = {
    .name = "agent",
    .reads_host = true,
    .run = run,
    .synopsis = "agent [--policy FILE] [--listen ADDR:PORT] [--web-config FILE] [--state FILE]\n"
                "             [--proc DIR] [--dry-run] [--no-libvirt-duplicates]",
    .summary = "Run the policy loop continuously and serve Prometheus metrics on /metrics: inflate\n"
               "latency by SG, reclaimed memory, per-domain and host memory, the agent's health.",
};
