#include "cni/files.h"

#include <fstream>
#include <sstream>

#include "sys/error.h"

namespace npf::cni {

std::string readWhole(const std::string& file)
{
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throwErrno("read " + file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace npf::cni
