#include "commands.h"

#include "cli/exit_codes.h"

namespace npf::cli {

int run(const Options& opt)
{
    switch (opt.cmd) {
    case Command::Attach: return cmdAttach(opt);
    case Command::Detach: return cmdDetach(opt);
    case Command::Status: return cmdStatus(opt);
    case Command::Stats: return cmdStats(opt);
    case Command::FlowAdd: return cmdFlowAdd(opt);
    case Command::FlowDel: return cmdFlowDel(opt);
    case Command::FlowList: return cmdFlowList(opt);
    case Command::None: break;
    }
    return kExitUsage;
}

} // namespace npf::cli
