#include "cni/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "sys/error.h"
#include "sys/fd.h"
#include "sys/io.h"

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

void replaceWhole(const std::string& file, const std::string& tmp, std::string_view bytes, mode_t mode)
{
    {
        Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
        if (!f)
            throwErrno("create " + tmp);
        if (int err = pwriteFull(f.get(), bytes.data(), bytes.size(), 0))
            throwErrno(-err, "write " + tmp);
        checkErrno(::fchmod(f.get(), mode), "chmod " + tmp);
        checkErrno(::fsync(f.get()), "fsync " + tmp);
    }
    checkErrno(::rename(tmp.c_str(), file.c_str()), "rename " + tmp + " to " + file);
}

} // namespace npf::cni
