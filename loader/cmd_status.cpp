// npfctl status
#include <cstdio>

#include "commands.h"
#include "ctl/json.h"
#include "ctl/status.h"
#include "exit_codes.h"
#include "format.h"
#include "sys/log.h"

namespace npf::cli {

int cmdStatus(const Options& opt)
{
    std::vector<ctl::InstanceStatus> rows;
    if (!opt.ifname.empty())
        rows.push_back(ctl::instanceStatus(opt.ifname));
    else
        rows = ctl::allInstances();

    if (opt.json) {
        ctl::Json a = ctl::Json::array();
        for (const ctl::InstanceStatus& s : rows)
            a.push_back(ctl::toJson(s));
        std::printf("%s\n", a.dump(2).c_str());
    } else {
        std::fputs(statusTable(rows).c_str(), stdout);
    }
    for (const ctl::InstanceStatus& s : rows) {
        if (!s.problem.empty())
            NPF_WARN("%s: %s", s.ifname.c_str(), s.problem.c_str());
        for (const ctl::XdpProgram& p : s.foreign)
            NPF_INFO("%s: foreign XDP program '%s' (id %u, %s)", s.ifname.c_str(), p.name.c_str(), p.id,
                     ctl::toString(p.slot));
    }
    return kExitOk;
}

} // namespace npf::cli
