#include "sys/replace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/error.h"
#include "sys/fd.h"
#include "sys/io.h"

namespace npf {

void replaceWhole(const std::string& file, const std::string& tmp, std::string_view bytes, mode_t mode, bool sync)
{
    {
        Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
        if (!f)
            throwErrno("create " + tmp);
        if (int err = pwriteFull(f.get(), bytes.data(), bytes.size(), 0))
            throwErrno(-err, "write " + tmp);
        checkErrno(::fchmod(f.get(), mode), "chmod " + tmp);
        if (sync)
            checkErrno(::fsync(f.get()), "fsync " + tmp);
    }
    checkErrno(::rename(tmp.c_str(), file.c_str()), "rename " + tmp + " to " + file);
}

} // namespace npf
