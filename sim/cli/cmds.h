/* The alisa subcommands: one entry point and one usage printer each. */
#ifndef ALISA_CMDS_H
#define ALISA_CMDS_H

#include <stdio.h>

int cmd_catalog(int argc, char **argv);
void cmd_catalog_usage(FILE *out);
int cmd_trace(int argc, char **argv);
void cmd_trace_usage(FILE *out);

int cmd_policy(int argc, char **argv);
void cmd_policy_usage(FILE *out);
int cmd_plan(int argc, char **argv);
void cmd_plan_usage(FILE *out);

int cmd_search(int argc, char **argv);
void cmd_search_usage(FILE *out);

int cmd_sim(int argc, char **argv);
void cmd_sim_usage(FILE *out);

#endif
