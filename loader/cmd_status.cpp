// npfctl status
#include <cstdio>

#include "cli/exit_codes.h"
#include "cli/json.h"
#include "commands.h"
#include "dataplane/status.h"
#include "format.h"
#include "sys/log.h"

namespace npf::cli {

int cmdStatus(const Options& opt)
{
    std::vector<dataplane::InstanceStatus> rows;
    if (!opt.ifname.empty())
        rows.push_back(dataplane::instanceStatus(opt.ifname));
    else
        rows = dataplane::allInstances();

    if (opt.json) {
        Json a = Json::array();
        for (const dataplane::InstanceStatus& s : rows)
            a.push_back(toJson(s));
        std::printf("%s\n", a.dump(2).c_str());
    } else {
        std::fputs(statusTable(rows).c_str(), stdout);
    }
    for (const dataplane::InstanceStatus& s : rows) {
        if (!s.problem.empty())
            NPF_WARN("%s: %s", s.ifname.c_str(), s.problem.c_str());
        if (s.chained)
            NPF_INFO("%s: XDP program '%s' (id %u) chained behind %s", s.ifname.c_str(), s.chained->name.c_str(),
                     s.chained->id, NPF_PROG_NAME);
        for (const dataplane::XdpProgram& p : s.foreign)
            NPF_INFO("%s: foreign XDP program '%s' (id %u, %s)", s.ifname.c_str(), p.shownName().c_str(), p.id,
                     dataplane::toString(p.slot));
    }
    return kExitOk;
}

} // namespace npf::cli
