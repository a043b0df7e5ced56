// One "## " section of a Markdown file, for the tests that check a doc
// (docs/cli.md) against the tables the code lists.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace npf::test {

// The lines of section `heading` ("## Counters") of the file at `path`,
// without the heading; empty if the file or the section is missing.
inline std::vector<std::string> docSection(const std::string& path, const std::string& heading)
{
    std::ifstream in(path);
    std::vector<std::string> out;
    std::string line;
    bool inSection = false;
    while (std::getline(in, line)) {
        if (line.rfind("## ", 0) == 0)
            inSection = line == heading;
        else if (inSection)
            out.push_back(line);
    }
    return out;
}

} // namespace npf::test
