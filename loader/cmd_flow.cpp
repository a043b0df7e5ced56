// npfctl flow add / del / list
#include <cstdio>

#include "commands.h"
#include "ctl/dataplane.h"
#include "ctl/flows.h"
#include "ctl/json.h"
#include "exit_codes.h"
#include "format.h"

namespace npf::cli {

int cmdFlowAdd(const Options& opt)
{
    ctl::FlowSpec f = ctl::parseFlowSpec(opt.port, opt.addr);
    ctl::Dataplane dp = ctl::Dataplane::open(opt.ifname);
    ctl::FlowEntry e = ctl::addFlow(dp, f);
    std::printf("added flow %u on %s: %s\n", e.id, opt.ifname.c_str(), ctl::toString(f).c_str());
    return kExitOk;
}

int cmdFlowDel(const Options& opt)
{
    ctl::FlowSpec f = ctl::parseFlowSpec(opt.port, opt.addr);
    ctl::Dataplane dp = ctl::Dataplane::open(opt.ifname);
    ctl::delFlow(dp, f);
    std::printf("deleted flow on %s: %s\n", opt.ifname.c_str(), ctl::toString(f).c_str());
    return kExitOk;
}

int cmdFlowList(const Options& opt)
{
    ctl::Dataplane dp = ctl::Dataplane::open(opt.ifname);
    std::vector<ctl::FlowInfo> flows = ctl::listFlows(dp);
    if (opt.json) {
        ctl::Json j{{"interface", opt.ifname}, {"flows", ctl::toJson(flows)}};
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::fputs(flowTable(flows).c_str(), stdout);
    }
    return kExitOk;
}

} // namespace npf::cli
