// npfctl attach / detach
#include <cstdio>

#include "cli/args.h"
#include "cli/exit_codes.h"
#include "commands.h"
#include "dataplane/attach.h"
#include "dataplane/pins.h"
#include "format.h"
#include "sys/log.h"

namespace npf::cli {

int cmdAttach(const Options& opt)
{
    dataplane::AttachOptions a;
    a.ifname = opt.ifname;
    a.mode = parseMode(opt.mode).value_or(dataplane::AttachMode::Native);
    a.queues = opt.queues;
    a.force = opt.force;
    a.thenPin = opt.then;
    a.thenExisting = opt.thenExisting;
    dataplane::AttachResult r = dataplane::attach(a);
    std::printf("%s\n", attachSummary(r).c_str());
    return kExitOk;
}

int cmdDetach(const Options& opt)
{
    dataplane::DetachResult r = dataplane::detach(opt.ifname, opt.force);
    std::string pins = dataplane::pinDir(opt.ifname);
    if (r.detached)
        std::printf("detached %s (prog id %u) from %s%s\n", NPF_PROG_NAME, r.progId, opt.ifname.c_str(),
                    r.removedPins ? ("; removed pins " + pins).c_str() : "");
    else
        std::printf("npf is not attached to %s%s\n", opt.ifname.c_str(),
                    r.removedPins ? ("; removed stale pins " + pins).c_str() : "");
    if (r.restored)
        std::printf("put XDP program '%s' (prog id %u), chained behind %s, in its place on %s\n", r.restored->name.c_str(),
                    r.restored->id, NPF_PROG_NAME, opt.ifname.c_str());
    for (const dataplane::XdpProgram& p : r.foreignRemoved)
        NPF_INFO("removed foreign XDP program '%s' (id %u, %s) from %s (--force)", p.shownName().c_str(), p.id,
                 dataplane::toString(p.slot), opt.ifname.c_str());
    for (const dataplane::XdpProgram& p : r.foreignLeft)
        NPF_INFO("left foreign XDP program '%s' (id %u, %s) on %s (--force removes it)", p.shownName().c_str(),
                 p.id, dataplane::toString(p.slot), opt.ifname.c_str());
    return kExitOk;
}

} // namespace npf::cli
