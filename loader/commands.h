// npfctl subcommands. Each prints its result on stdout and returns an exit
// code; failures are thrown (main maps them with exitCodeFor).
#pragma once

#include "cli.h"

namespace npf::cli {

int run(const Options& opt);

int cmdAttach(const Options& opt);
int cmdDetach(const Options& opt);
int cmdStatus(const Options& opt);
int cmdStats(const Options& opt);
int cmdFlowAdd(const Options& opt);
int cmdFlowDel(const Options& opt);
int cmdFlowList(const Options& opt);

} // namespace npf::cli
