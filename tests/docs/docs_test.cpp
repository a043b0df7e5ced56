// Documentation that tests keep true (label docs). README.md and docs/*.md
// against what they document:
//   - the programs' options, ranges and choices against their real --help
//     (npfctl per subcommand, npf-recv, npfd, npf-bench);
//   - limits and versions against include/npf/abi.h and the protocol header;
//   - npfctl's output lines and pinned maps against a real attach (root);
//   - the npfd client example's sizes against every shipped config;
//   - docs/BENCHMARKS.md's tables are dated and labelled with their CPU, the
//     newest first;
//   - relative links and their #anchors resolve; nothing points outside the
//     repository.
// The README's C++ examples are compiled and linked against npf::npf by the
// build itself (docs_examples, see CMakeLists.txt).
//
// The checks read statements where the documents make them and compare the
// facts; they do not require a wording. Every failure names the file and line
// and says what to change.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "npf/abi.h"
#include "npf/client.h"

namespace {

namespace fs = std::filesystem;

const fs::path kSource = NPF_SOURCE_DIR;

std::string readFile(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// ---- documents -------------------------------------------------------------

struct Doc {
    std::string rel; // path relative to the repository, for messages
    std::string text;

    static Doc load(const std::string& rel) { return {rel, readFile(kSource / rel)}; }

    int lineOf(size_t pos) const
    {
        return 1 + static_cast<int>(std::count(text.begin(), text.begin() + std::min(pos, text.size()), '\n'));
    }
    std::string at(size_t pos) const { return rel + ":" + std::to_string(lineOf(pos)); }
};

std::vector<std::string> markdownFiles()
{
    std::vector<std::string> out = {"README.md"};
    for (const auto& e : fs::directory_iterator(kSource / "docs"))
        if (e.path().extension() == ".md")
            out.push_back("docs/" + e.path().filename().string());
    std::sort(out.begin() + 1, out.end());
    return out;
}

// Byte ranges of fenced code blocks (``` ... ```), and of their first line.
struct Fence {
    size_t begin, end; // the lines between the fences
    std::string firstLine;
};

std::vector<Fence> fences(const std::string& t)
{
    std::vector<Fence> out;
    size_t pos = 0;
    std::optional<size_t> open;
    while (pos < t.size()) {
        size_t eol = t.find('\n', pos);
        if (eol == std::string::npos)
            eol = t.size();
        std::string_view line(t.data() + pos, eol - pos);
        const size_t ws = line.find_first_not_of(' ');
        if (ws != std::string::npos && line.substr(ws).rfind("```", 0) == 0) {
            if (!open) {
                open = eol + 1;
            } else {
                const size_t b = std::min(*open, pos);
                const size_t fe = t.find('\n', b);
                out.push_back({b, pos, t.substr(b, (fe == std::string::npos ? pos : std::min(fe, pos)) - b)});
                open.reset();
            }
        }
        pos = eol + 1;
    }
    return out;
}

bool inFence(const std::vector<Fence>& f, size_t pos)
{
    for (const Fence& x : f)
        if (pos >= x.begin && pos < x.end)
            return true;
    return false;
}

// A piece of code in a document: an inline `span` or one line of a fenced block.
struct Code {
    std::string text;
    size_t pos;
    const Fence* fence; // the block it is a line of, or null for a span
};

std::vector<Code> codeOf(const std::string& t, const std::vector<Fence>& fs_, size_t begin, size_t end)
{
    std::vector<Code> out;
    for (const Fence& f : fs_) {
        if (f.begin < begin || f.begin >= end)
            continue;
        size_t p = f.begin;
        while (p < f.end) {
            size_t eol = std::min(t.find('\n', p), f.end);
            out.push_back({t.substr(p, eol - p), p, &f});
            p = eol + 1;
        }
    }
    size_t p = begin;
    while (p < end) {
        const size_t a = t.find('`', p);
        if (a == std::string::npos || a >= end)
            break;
        if (inFence(fs_, a) || t.compare(a, 3, "```") == 0) {
            p = t.find('\n', a);
            if (p == std::string::npos)
                break;
            continue;
        }
        const size_t b = t.find('`', a + 1);
        if (b == std::string::npos || b >= end)
            break;
        const std::string s = t.substr(a + 1, b - a - 1);
        if (s.find("\n\n") == std::string::npos) {
            out.push_back({s, a + 1, nullptr});
            p = b + 1;
        } else {
            p = a + 1;
        }
    }
    return out;
}

struct Section {
    std::string heading;
    int level;
    size_t begin, end; // the heading line to the next heading of the same or a higher level
};

std::vector<Section> sections(const std::string& t)
{
    const auto f = fences(t);
    std::vector<Section> out;
    size_t pos = 0;
    while (pos < t.size()) {
        size_t eol = t.find('\n', pos);
        if (eol == std::string::npos)
            eol = t.size();
        if (t[pos] == '#' && !inFence(f, pos)) {
            const size_t hashes = t.find_first_not_of('#', pos) - pos;
            if (hashes <= 6 && t[pos + hashes] == ' ')
                out.push_back({t.substr(pos + hashes + 1, eol - pos - hashes - 1), static_cast<int>(hashes), pos, t.size()});
        }
        pos = eol + 1;
    }
    for (size_t i = 0; i < out.size(); i++)
        for (size_t j = i + 1; j < out.size(); j++)
            if (out[j].level <= out[i].level) {
                out[i].end = out[j].begin;
                break;
            }
    return out;
}

// GitHub's anchor of a heading: lower case; letters, digits, '-' and '_'
// kept; spaces become '-'; everything else dropped.
std::string slug(const std::string& heading)
{
    std::string s;
    for (unsigned char c : heading) {
        if (std::isalnum(c) || c == '-' || c == '_')
            s += static_cast<char>(std::tolower(c));
        else if (c == ' ')
            s += '-';
        else if (c >= 0x80 && std::isalpha(c))
            s += static_cast<char>(c);
    }
    return s;
}

std::set<std::string> anchors(const std::string& t)
{
    std::set<std::string> out;
    std::map<std::string, int> seen;
    for (const Section& s : sections(t)) {
        const std::string a = slug(s.heading);
        const int n = seen[a]++;
        out.insert(n ? a + "-" + std::to_string(n) : a);
    }
    return out;
}

// ---- programs and their --help --------------------------------------------

struct Output {
    int status;
    std::string out;
};

Output run(const std::string& cmd)
{
    Output r{-1, ""};
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p)
        return r;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
        r.out.append(buf, n);
    const int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

struct Option {
    std::string name; // the long name (or the short one if it has none)
    std::optional<std::pair<double, double>> range;
    std::set<std::string> choices;
};

struct Help {
    std::map<std::string, Option> options; // every name (-x, --xyz) of every option but --help
    std::vector<std::string> subcommands;

    bool has(const std::string& o) const { return options.count(o) != 0; }
    std::set<std::string> longNames() const
    {
        std::set<std::string> s;
        for (const auto& [n, o] : options)
            s.insert(o.name);
        return s;
    }
    // Each option's long name -> all its names (-n, --count).
    std::map<std::string, std::set<std::string>> names() const
    {
        std::map<std::string, std::set<std::string>> m;
        for (const auto& [n, o] : options)
            m[o.name].insert(n);
        return m;
    }
};

// CLI11's help: "  -i,--iface TEXT ...   text" under "Options:", "  attach   text"
// under "Subcommands:". The type column carries ranges ("in [1 - 64]") and
// choices ("{native,skb}").
Help parseHelp(const std::string& text)
{
    Help h;
    std::istringstream in(text);
    std::string section;
    static const std::regex range(R"(in \[([-0-9.e+]+) - ([-0-9.e+]+)\])");
    static const std::regex choice(R"(\{([^}]*)\})");
    for (std::string l; std::getline(in, l);) {
        if (!l.empty() && l[0] != ' ') {
            section = l;
            continue;
        }
        const size_t a = l.find_first_not_of(' ');
        if (a == std::string::npos || a > 4)
            continue;
        const size_t b = std::min(l.find(' ', a), l.size());
        const std::string first = l.substr(a, b - a);
        if (section.rfind("Subcommands", 0) == 0) {
            h.subcommands.push_back(first);
            continue;
        }
        if (section.rfind("Options", 0) != 0 || first[0] != '-')
            continue;
        const size_t specEnd = l.find("  ", b);
        const std::string spec = l.substr(b, specEnd == std::string::npos ? std::string::npos : specEnd - b);
        Option o;
        std::vector<std::string> names;
        std::stringstream ns(first);
        for (std::string n; std::getline(ns, n, ',');)
            names.push_back(n);
        o.name = names.back();
        std::smatch m;
        if (std::regex_search(spec, m, range))
            o.range = {std::stod(m[1]), std::stod(m[2])};
        if (std::regex_search(spec, m, choice)) {
            std::stringstream cs(m[1].str());
            for (std::string c; std::getline(cs, c, ',');)
                o.choices.insert(c);
        }
        if (o.name == "--help")
            continue;
        for (const auto& n : names)
            h.options[n] = o;
    }
    return h;
}

struct Program {
    std::string name, path;
    std::map<std::string, Help> commands; // "" = the program; npfctl: "attach", "flow add", ...

    const Help& top() const { return commands.at(""); }
    // Every option of every command (npfctl), by name.
    std::map<std::string, Option> allOptions() const
    {
        std::map<std::string, Option> m;
        for (const auto& [c, h] : commands)
            m.insert(h.options.begin(), h.options.end());
        return m;
    }
};

Program load(const std::string& name, const std::string& path)
{
    Program p{name, path, {}};
    std::vector<std::string> todo = {""};
    while (!todo.empty()) {
        const std::string c = todo.back();
        todo.pop_back();
        const Output r = run(path + (c.empty() ? "" : " " + c) + " --help");
        EXPECT_EQ(r.status, 0) << path << " " << c << " --help failed:\n" << r.out;
        p.commands[c] = parseHelp(r.out);
        for (const auto& s : p.commands[c].subcommands)
            todo.push_back(c.empty() ? s : c + " " + s);
    }
    EXPECT_FALSE(p.top().options.empty() && p.top().subcommands.empty()) << name << " --help shows no options";
    return p;
}

const std::vector<Program>& programs()
{
    static const std::vector<Program> p = {
        load("npfctl", NPFCTL_PATH),
        load("npf-recv", NPF_RECV_PATH),
        load("npf-send", NPF_SEND_PATH),
        load("npfd", NPFD_PATH),
        load("npf-bench", NPF_BENCH_PATH),
        load("npf-cni", NPF_CNI_PATH),
    };
    return p;
}

const Program& program(const std::string& name)
{
    for (const Program& p : programs())
        if (p.name == name)
            return p;
    throw std::runtime_error("no program " + name);
}

// The leaf commands of npfctl ("attach", "flow add", ...).
std::vector<std::string> npfctlCommands()
{
    std::vector<std::string> out;
    for (const auto& [c, h] : program("npfctl").commands)
        if (!c.empty() && h.subcommands.empty())
            out.push_back(c);
    return out;
}

// ---- option tokens in text ------------------------------------------------

struct Token {
    std::string option;
    size_t pos; // in the document
};

std::vector<Token> optionTokens(const std::string& s, size_t base)
{
    // --long, and -x alone (not -vv, not -1)
    static const std::regex re(R"((^|[\s\[(`|,/=])(--[a-z][a-z0-9-]*[a-z0-9]|-[A-Za-z](?=$|[\s\]`),])))");
    std::vector<Token> out;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back({(*it)[2].str(), base + static_cast<size_t>(it->position(2))});
    return out;
}

std::string firstWord(const std::string& s)
{
    std::istringstream in(s);
    std::string w;
    in >> w;
    if (w == "sudo")
        in >> w;
    return w;
}

// The program a piece of code invokes: its first word's base name, if it is one of ours.
std::optional<std::string> invoked(const std::string& code)
{
    std::string w = firstWord(code);
    w = w.substr(w.rfind('/') == std::string::npos ? 0 : w.rfind('/') + 1);
    for (const Program& p : programs())
        if (w == p.name)
            return p.name;
    return std::nullopt;
}

// Which program a section documents: the one its heading names; in
// docs/cli.md (npfctl's reference) a top-level section other than Counters
// is npfctl's.
std::optional<std::string> sectionProgram(const Doc& d, const Section& s)
{
    for (const char* p : {"npf-recv", "npf-send", "npfd", "npfctl", "npf-bench", "npf-cni"})
        if (std::regex_search(s.heading, std::regex(std::string("(^|[^a-z-])") + p + "($|[^a-z-])")))
            return std::string(p);
    if (d.rel == "docs/cli.md" && s.level == 2 && s.heading.find("Counters") == std::string::npos)
        return std::string("npfctl");
    return std::nullopt;
}

struct Mention {
    std::string program, option;
    size_t pos;
    std::string after; // the text after the token, to the end of its clause
};

// Every option token of a document attributed to a program:
//  - in code that invokes it (`npfd --iface ...`, a line of a shell block,
//    and the comment lines that follow that line in the block);
//  - in code that is an option (`--queues N`) or a comment line of a block
//    without an invocation, inside a section about the program (README's
//    "libnpf and npf-recv", cli.md's "npfd", ...). docs/BENCHMARKS.md names
//    several programs' options in its prose: only its invocations count.
std::vector<Mention> mentions(const Doc& d)
{
    std::vector<Mention> out;
    const auto f = fences(d.text);
    const auto secs = sections(d.text);
    auto progAt = [&](size_t pos) -> std::optional<std::string> {
        if (d.rel == "docs/BENCHMARKS.md")
            return std::nullopt;
        const Section* best = nullptr;
        for (const Section& s : secs)
            if (pos >= s.begin && pos < s.end && s.level >= 2 && (!best || s.level > best->level))
                best = &s;
        for (int level = best ? best->level : 0; best && level >= 2; level--)
            for (const Section& s : secs)
                if (pos >= s.begin && pos < s.end && s.level == level)
                    if (auto p = sectionProgram(d, s))
                        return p;
        return std::nullopt;
    };
    const Fence* fence = nullptr;
    std::optional<std::string> lineProg; // the program the last command line of the block invoked
    for (const Code& c : codeOf(d.text, f, 0, d.text.size())) {
        if (c.fence != fence) {
            fence = c.fence;
            lineProg.reset();
        }
        const std::string first = firstWord(c.text);
        std::optional<std::string> prog = invoked(c.text);
        if (c.fence && !first.empty() && first[0] != '#' && first[0] != '-')
            lineProg = prog; // a command line: ours, or another tool's
        else if (c.fence && !first.empty())
            prog = lineProg; // a comment or continuation line: the command's
        if (!prog && !first.empty() && (first[0] == '-' || (c.fence && first[0] == '#' && !lineProg)))
            prog = progAt(c.pos);
        if (!prog)
            continue;
        for (const Token& t : optionTokens(c.text, c.pos)) {
            const size_t rel = t.pos - c.pos + t.option.size();
            std::string after = c.text.substr(rel);
            // The prose after a span describes it too ("`--queues N` -- ... (1..64)").
            if (!c.fence) {
                const size_t end = std::min({d.text.find("\n\n", t.pos), d.text.find("\n- ", t.pos), d.text.size()});
                after = d.text.substr(t.pos + t.option.size(), std::min<size_t>(end - t.pos - t.option.size(), 300));
            }
            const auto next = optionTokens(after, 0);
            if (!next.empty())
                after = after.substr(0, next.front().pos);
            out.push_back({*prog, t.option, t.pos, after});
        }
    }
    return out;
}

double number(const std::string& s) { return std::stod(s); }

// ---- npfctl synopses ------------------------------------------------------

struct Synopsis {
    std::vector<std::string> commands; // "flow add", "flow del" (add|del)
    std::set<std::string> options;
    bool full; // [--bracketed options]: the command's whole synopsis
    bool global;
    size_t pos;
    std::string text;
};

std::string unescapeTable(std::string s)
{
    for (size_t p; (p = s.find("\\|")) != std::string::npos;)
        s.replace(p, 2, "|");
    return s;
}

// `npfctl attach IFACE [--mode native|skb] ...`, or a line of a fenced block
// that starts with `npfctl [` (the lines after it omit "npfctl").
std::vector<Synopsis> npfctlSynopses(const Doc& d, std::vector<std::string>& errors)
{
    const Program& ctl = program("npfctl");
    std::vector<Synopsis> out;
    const auto f = fences(d.text);
    for (const Code& c : codeOf(d.text, f, 0, d.text.size())) {
        std::string s = unescapeTable(c.text);
        const size_t a = s.find_first_not_of(' ');
        if (a == std::string::npos)
            continue;
        s = s.substr(a);
        const bool prefixed = s.rfind("npfctl ", 0) == 0;
        const bool inBlock = c.fence && c.fence->firstLine.rfind("npfctl [", 0) == 0;
        if (!prefixed && !inBlock)
            continue;
        if (prefixed)
            s = s.substr(7);
        std::istringstream in(s);
        std::vector<std::string> words;
        for (std::string w; in >> w;)
            words.push_back(w);
        if (words.empty())
            continue;
        Synopsis syn{{}, {}, s.find("[--") != std::string::npos, false, c.pos, c.text};
        for (const Token& t : optionTokens(s, 0))
            syn.options.insert(t.option);
        const std::string& w0 = words[0];
        if (w0[0] == '[' || w0 == "SUBCOMMAND" || w0[0] == '-') {
            syn.global = true;
            if (w0[0] == '-' || w0[0] == '[')
                out.push_back(syn);
            continue;
        }
        if (!std::islower(static_cast<unsigned char>(w0[0])) || w0 == "...")
            continue;
        if (!ctl.commands.count(w0)) {
            if (prefixed)
                errors.push_back(d.at(c.pos) + ": `npfctl " + w0 + "`: npfctl has no subcommand " + w0 +
                                 " (npfctl --help): fix or remove it");
            continue;
        }
        if (ctl.commands.at(w0).subcommands.empty()) {
            syn.commands.push_back(w0);
        } else if (words.size() > 1) {
            std::string alts = words[1];
            std::replace(alts.begin(), alts.end(), '/', '|');
            std::stringstream as(alts);
            for (std::string sub; std::getline(as, sub, '|');) {
                if (ctl.commands.count(w0 + " " + sub))
                    syn.commands.push_back(w0 + " " + sub);
                else if (std::islower(static_cast<unsigned char>(sub[0])))
                    errors.push_back(d.at(c.pos) + ": `npfctl " + w0 + " " + sub + "`: npfctl " + w0 +
                                     " has no subcommand " + sub + ": fix or remove it");
            }
        }
        if (!syn.commands.empty())
            out.push_back(syn);
    }
    return out;
}

std::string join(const std::set<std::string>& s)
{
    std::string o;
    for (const auto& x : s)
        o += (o.empty() ? "" : " ") + x;
    return o;
}

// ============================================================================

TEST(DocsPrograms, HelpIsParsed)
{
    for (const Program& p : programs()) {
        SCOPED_TRACE(p.name);
        EXPECT_TRUE(!p.top().options.empty() || !p.top().subcommands.empty());
    }
    EXPECT_GE(npfctlCommands().size(), 5u);
}

// Every `npfctl SUBCOMMAND ...` in cli.md and README names a real subcommand
// and only its options; a full synopsis ([--option] ...) lists all of them;
// cli.md has a synopsis of every subcommand.
TEST(DocsNpfctl, SynopsesMatchHelp)
{
    const Program& ctl = program("npfctl");
    std::vector<std::string> errors;
    std::set<std::string> documented;
    for (const char* rel : {"docs/cli.md", "README.md"}) {
        const Doc d = Doc::load(rel);
        for (const Synopsis& s : npfctlSynopses(d, errors)) {
            if (s.global) {
                for (const auto& o : s.options)
                    if (!ctl.top().has(o))
                        errors.push_back(d.at(s.pos) + ": `npfctl " + o + "`: npfctl has no global option " + o);
                continue;
            }
            for (const std::string& cmd : s.commands) {
                const Help& h = ctl.commands.at(cmd);
                if (s.full && d.rel == "docs/cli.md")
                    documented.insert(cmd);
                for (const auto& o : s.options)
                    if (!h.has(o))
                        errors.push_back(d.at(s.pos) + ": `npfctl " + cmd + "` has no option " + o +
                                         " (npfctl " + cmd + " --help lists: " + join(h.longNames()) +
                                         "): remove it from the docs");
                if (s.full)
                    for (const auto& [o, all] : h.names())
                        if (std::none_of(all.begin(), all.end(), [&](const auto& n) { return s.options.count(n); }))
                            errors.push_back(d.at(s.pos) + ": the synopsis of `npfctl " + cmd + "` lacks " + o +
                                             ", which `npfctl " + cmd + " --help` lists: add it (and describe it)");
            }
        }
    }
    for (const std::string& cmd : npfctlCommands())
        if (!documented.count(cmd))
            errors.push_back("docs/cli.md: no synopsis of `npfctl " + cmd +
                             " ...` with its [--options]: document the subcommand");
    for (const auto& e : errors)
        ADD_FAILURE() << e;
}

// Options attributed to a program (code invoking it, or its sections) exist;
// stated ranges "(LO..HI)" and choices "a|b" match --help.
TEST(DocsOptions, MentionsMatchHelp)
{
    std::vector<std::string> errors;
    static const std::regex rangeRe(R"(\((\d+(?:\.\d+)?)\s*\.\.\s*(\d+(?:\.\d+)?))");
    static const std::regex choiceRe(R"(^ ([A-Za-z0-9]+(?:\\?\|[A-Za-z0-9]+)+))");
    for (const std::string& rel : markdownFiles()) {
        const Doc d = Doc::load(rel);
        for (const Mention& m : mentions(d)) {
            if (m.option == "--help" || m.option == "-h")
                continue;
            const auto opts = program(m.program).allOptions();
            auto it = opts.find(m.option);
            if (it == opts.end()) {
                errors.push_back(d.at(m.pos) + ": " + m.program + " has no option " + m.option + " (" + m.program +
                                 " --help): remove or correct it");
                continue;
            }
            const Option& o = it->second;
            std::smatch r;
            if (o.range && std::regex_search(m.after, r, rangeRe) &&
                (number(r[1]) != o.range->first || number(r[2]) != o.range->second)) {
                std::ostringstream want;
                want << o.range->first << ".." << o.range->second;
                errors.push_back(d.at(m.pos) + ": " + m.program + " " + m.option + " takes " + want.str() +
                                 " (--help), the docs say " + r[1].str() + ".." + r[2].str() + ": fix the range");
            }
            if (!o.choices.empty() && std::regex_search(m.after, r, choiceRe)) {
                std::string c = unescapeTable(r[1]);
                std::set<std::string> said;
                std::stringstream cs(c);
                for (std::string x; std::getline(cs, x, '|');)
                    said.insert(x);
                if (said != o.choices)
                    errors.push_back(d.at(m.pos) + ": " + m.program + " " + m.option + " takes " + join(o.choices) +
                                     " (--help), the docs say " + join(said) + ": fix the choices");
            }
        }
    }
    for (const auto& e : errors)
        ADD_FAILURE() << e;
}

// Every option of npf-recv, npfd and npf-cni is documented in README.md or
// docs/cli.md (by its long or its short name), every option of npf-bench in
// docs/BENCHMARKS.md.
TEST(DocsOptions, EveryOptionDocumented)
{
    std::map<std::string, std::set<std::string>> seen;
    for (const char* rel : {"README.md", "docs/cli.md"})
        for (const Mention& m : mentions(Doc::load(rel)))
            seen[m.program].insert(m.option);
    for (const Token& t : optionTokens(Doc::load("docs/BENCHMARKS.md").text, 0))
        seen["npf-bench"].insert(t.option);
    for (const char* p : {"npf-recv", "npf-send", "npfd", "npf-bench", "npf-cni"}) {
        for (const auto& [o, all] : program(p).top().names())
            if (std::none_of(all.begin(), all.end(), [&](const std::string& n) { return seen[p].count(n); }))
                ADD_FAILURE() << p << " " << o << " (" << p << " --help) is documented nowhere: describe it in "
                              << (std::string(p) == "npf-bench" ? "docs/BENCHMARKS.md"
                                                                : std::string("docs/cli.md or README.md, in the ") +
                                                                      p + " section");
    }
}

// The programs' limits are the ABI's.
TEST(DocsLimits, ProgramsUseAbiLimits)
{
    const auto q = program("npfctl").commands.at("attach").options.at("--queues").range;
    ASSERT_TRUE(q);
    EXPECT_EQ(q->second, NPF_MAX_QUEUES) << "npfctl attach --queues' maximum is not NPF_MAX_QUEUES";
    for (const char* p : {"npf-recv", "npfd"}) {
        const auto r = program(p).top().options.at("--queues").range;
        ASSERT_TRUE(r) << p;
        EXPECT_EQ(r->second, NPF_MAX_QUEUES) << p << " --queues' maximum is not NPF_MAX_QUEUES";
    }
}

struct Constant {
    const char* name;
    unsigned long long value;
};

const Constant kConstants[] = {
    {"NPF_ABI_VERSION", NPF_ABI_VERSION},
    {"NPF_RING_LAYOUT_VERSION", NPF_RING_LAYOUT_VERSION},
    {"NPF_MAX_FLOWS", NPF_MAX_FLOWS},
    {"NPF_MAX_QUEUES", NPF_MAX_QUEUES},
    {"NPF_POST_RING_SIZE", NPF_POST_RING_SIZE},
    {"NPF_PAGE_SIZE", NPF_PAGE_SIZE},
    {"NPF_MAX_PAYLOAD", NPF_MAX_PAYLOAD},
    {"NPF_MAX_PKT_PAGES", NPF_MAX_PKT_PAGES},
    {"NPF_CAS_RETRIES", NPF_CAS_RETRIES},
    {"NPF_MAX_REGION_PAGES", NPF_MAX_REGION_PAGES},
    {"NPF_BITMAP_CLASSES", NPF_BITMAP_CLASSES},
    {"NPF_META_VERSION", NPF_META_VERSION},
    {"NPF_FAST_STAMP_EVERY", NPF_FAST_STAMP_EVERY},
};

// A protocol version constant (kProtocolVersion, kOldestProtocol), read from
// the header that defines it (wherever the sources keep it): docs/protocol.md
// states them.
std::optional<unsigned> protocolConstant(const std::string& name)
{
    const std::regex re(name + R"(\s*=\s*(\d+)\s*;)");
    for (const char* dir : {"userspace", "ipc", "include", "dataplane"}) {
        if (!fs::exists(kSource / dir))
            continue;
        for (const auto& e : fs::recursive_directory_iterator(kSource / dir)) {
            if (e.path().extension() != ".h")
                continue;
            const std::string t = readFile(e.path());
            std::smatch m;
            if (std::regex_search(t, m, re))
                return static_cast<unsigned>(std::stoul(m[1]));
        }
    }
    return std::nullopt;
}

// A size "1T", "64 MiB", "1 TiB" in bytes.
std::optional<unsigned long long> size(const std::string& num, const std::string& unit)
{
    unsigned long long v = std::stoull(num);
    const char u = unit.empty() ? ' ' : unit[0];
    const std::string units = "KMGT";
    const size_t i = units.find(u);
    if (i == std::string::npos)
        return std::nullopt;
    return v << (10 * (i + 1));
}

// Limits the documents state, wherever they state them: flow id ranges,
// numbers next to an ABI constant's name, the bitmap size classes, the
// largest region, the versions in docs/protocol.md, no stated test count.
TEST(DocsLimits, StatedLimitsMatchAbi)
{
    std::vector<std::string> errors;
    const auto proto = protocolConstant("kProtocolVersion"), oldest = protocolConstant("kOldestProtocol");
    EXPECT_TRUE(proto && oldest) << "kProtocolVersion or kOldestProtocol not found in the sources";
    std::vector<std::string> files = markdownFiles();
    for (const char* h : {"include/npf/abi.h", "include/npf/engine.h", "include/npf/client.h", "include/npf/counters.h",
                          "include/npf/log.h"})
        files.push_back(h);
    for (const std::string& rel : files) {
        const Doc d = Doc::load(rel);
        const std::string& t = d.text;
        std::smatch m;
        // "flow id (0..31)", "flow ids 0..1023"
        static const std::regex flowIds(R"(flow ids?\b[^.;:\n]{0,40}?\(?(\d+)\s*(?:\.\.|–|-| to )\s*(\d+))");
        for (auto it = std::sregex_iterator(t.begin(), t.end(), flowIds); it != std::sregex_iterator(); ++it)
            if (std::stoull((*it)[1]) != 0 || std::stoull((*it)[2]) != NPF_MAX_FLOWS - 1)
                errors.push_back(d.at(it->position()) + ": flow ids are 0.." + std::to_string(NPF_MAX_FLOWS - 1) +
                                 " (NPF_MAX_FLOWS " + std::to_string(NPF_MAX_FLOWS) + "), the text says " +
                                 (*it)[1].str() + ".." + (*it)[2].str());
        // "9216 bytes (`NPF_MAX_PAYLOAD`", "`NPF_FAST_STAMP_EVERY` (16)", "NPF_MAX_FLOWS = 1024"
        for (const Constant& c : kConstants) {
            const std::string n = c.name;
            const std::regex before("(\\d[\\d,]*)\\s*(?:[A-Za-z]+\\s*)?\\(`?" + n + "\\b");
            const std::regex after(n + "`?\\s*(?:\\(|=|is\\s)\\s*(\\d[\\d,]*)\\b");
            for (const std::regex* re : {&before, &after})
                for (auto it = std::sregex_iterator(t.begin(), t.end(), *re); it != std::sregex_iterator(); ++it) {
                    std::string v = (*it)[1];
                    v.erase(std::remove(v.begin(), v.end(), ','), v.end());
                    if (std::stoull(v) != c.value)
                        errors.push_back(d.at(it->position()) + ": " + n + " is " + std::to_string(c.value) +
                                         " (include/npf/abi.h), the text says " + (*it)[1].str());
                }
        }
        // npf_regions_0 ... npf_regions_<NPF_BITMAP_CLASSES - 1>
        static const std::regex classes(R"(npf_regions_0`?\s*(?:…|\.\.\.?)\s*`?(?:npf_regions)?_(\d+))");
        for (auto it = std::sregex_iterator(t.begin(), t.end(), classes); it != std::sregex_iterator(); ++it)
            if (std::stoul((*it)[1]) != NPF_BITMAP_CLASSES - 1)
                errors.push_back(d.at(it->position()) + ": the bitmap maps are npf_regions_0.._" +
                                 std::to_string(NPF_BITMAP_CLASSES - 1) + " (NPF_BITMAP_CLASSES), the text says _" +
                                 (*it)[1].str());
        // "--region ... at most 1T", "up to 1 TiB"
        static const std::regex maxRegion(R"(--region`?[^.\n]{0,40}?at most (\d+)\s*([KMGT]))");
        const unsigned long long maxBytes = NPF_MAX_REGION_PAGES * NPF_PAGE_SIZE;
        for (auto it = std::sregex_iterator(t.begin(), t.end(), maxRegion); it != std::sregex_iterator(); ++it)
            if (size((*it)[1], (*it)[2]) != maxBytes)
                errors.push_back(d.at(it->position()) + ": the largest region is " + std::to_string(maxBytes >> 30) +
                                 " GiB (NPF_MAX_REGION_PAGES), the text says " + (*it)[1].str() + (*it)[2].str());
        // A count of tests drifts with every test added.
        static const std::regex testCount(R"(\b(\d+) tests\b)");
        if (d.rel == "README.md" && std::regex_search(t, m, testCount))
            errors.push_back(d.at(m.position()) + ": \"" + m.str() +
                             "\": a count of tests is out of date with the next test: leave it out");
        // docs/protocol.md: the hello's versions
        if (d.rel == "docs/protocol.md" && proto && oldest) {
            static const std::regex protoRe(R"re("protocol"\s*:\s*(\d+))re"), abiRe(R"re("abi"\s*:\s*(\d+))re");
            static const std::regex speaks(R"(npfd speaks protocol (\d+) or (\d+))");
            static const std::regex table(R"(`kProtocolVersion`\s*\((\d+)\))");
            for (auto it = std::sregex_iterator(t.begin(), t.end(), protoRe); it != std::sregex_iterator(); ++it)
                if (std::stoul((*it)[1]) != *proto)
                    errors.push_back(d.at(it->position()) + ": \"protocol\" is " + std::to_string(*proto) +
                                     " (kProtocolVersion), the example says " + (*it)[1].str());
            for (auto it = std::sregex_iterator(t.begin(), t.end(), abiRe); it != std::sregex_iterator(); ++it)
                if (std::stoul((*it)[1]) != NPF_ABI_VERSION)
                    errors.push_back(d.at(it->position()) + ": \"abi\" is " + std::to_string(NPF_ABI_VERSION) +
                                     " (NPF_ABI_VERSION), the example says " + (*it)[1].str());
            for (auto it = std::sregex_iterator(t.begin(), t.end(), speaks); it != std::sregex_iterator(); ++it)
                if (std::stoul((*it)[1]) != *oldest || std::stoul((*it)[2]) != *proto)
                    errors.push_back(d.at(it->position()) + ": npfd speaks protocol " + std::to_string(*oldest) +
                                     " or " + std::to_string(*proto) + ", the text says " + it->str());
            for (auto it = std::sregex_iterator(t.begin(), t.end(), table); it != std::sregex_iterator(); ++it)
                if (std::stoul((*it)[1]) != *proto)
                    errors.push_back(d.at(it->position()) + ": kProtocolVersion is " + std::to_string(*proto) +
                                     ", the text says " + (*it)[1].str());
        }
    }
    for (const auto& e : errors)
        ADD_FAILURE() << e;
}

// A kernel version the start-up check names (kKernelMinimum, kKernelJumbo,
// kKernelPagePool: "{5, 18}"), read from the header that defines it.
std::optional<std::string> kernelConstant(const std::string& name)
{
    const std::regex re(name + R"(\{(\d+),\s*(\d+)\})");
    for (const auto& e : fs::recursive_directory_iterator(kSource / "userspace")) {
        if (e.path().extension() != ".h")
            continue;
        const std::string t = readFile(e.path());
        std::smatch m;
        if (std::regex_search(t, m, re))
            return m[1].str() + "." + m[2].str();
    }
    return std::nullopt;
}

// The kernel versions the documents give as npf's minimum, for jumbo
// datagrams (AF_XDP multi-buffer) and for the page pool (UFFDIO_MOVE) are
// the ones the start-up check (dataplane/kernel.h) uses.
TEST(DocsLimits, StatedKernelVersionsMatchTheCheck)
{
    const auto minimum = kernelConstant("kKernelMinimum"), jumbo = kernelConstant("kKernelJumbo"),
               pool = kernelConstant("kKernelPagePool");
    ASSERT_TRUE(minimum && jumbo && pool) << "kKernelMinimum, kKernelJumbo or kKernelPagePool not found";
    struct Claim {
        std::regex re;
        const std::string& want;
        const char* what;
    };
    const Claim claims[] = {
        {std::regex(R"((\d+\.\d+), the minimum)"), *minimum, "the minimum"},
        {std::regex(R"([Kk]ernel ≥ (\d+\.\d+))"), *minimum, "the minimum"},
        {std::regex(R"(Linux (\d+\.\d+) (?:at least|or later))"), *minimum, "the minimum"},
        {std::regex(R"(XDP_USE_SG`? \(Linux ≥ (\d+\.\d+))"), *jumbo, "AF_XDP multi-buffer"},
        {std::regex(R"(multi-buffer; Linux ≥ (\d+\.\d+))"), *jumbo, "AF_XDP multi-buffer"},
        {std::regex(R"(UFFDIO_MOVE`?,? \(?Linux (\d+\.\d+))"), *pool, "UFFDIO_MOVE"},
    };
    std::vector<std::string> files = markdownFiles();
    files.push_back("deploy/k8s/README.md");
    size_t seen = 0;
    for (const std::string& rel : files) {
        const Doc d = Doc::load(rel);
        for (const Claim& c : claims)
            for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), c.re); it != std::sregex_iterator();
                 ++it, ++seen)
                EXPECT_EQ((*it)[1].str(), c.want) << d.at(it->position()) << ": " << c.what << " is Linux " << c.want
                                                  << " (dataplane/kernel.h), the text says " << it->str();
    }
    EXPECT_GE(seen, 3u) << "the documents no longer state the kernel versions this test checks";
}

// Pins and stats files are keyed by network namespace:
// NPF_PIN_ROOT/netns-<inode>/<ifname>/<map>, /run/npf/netns-<inode>/<ifname>/engine.json.
TEST(DocsLimits, PathsKeyedByNetns)
{
    std::vector<std::string> files = markdownFiles();
    for (const auto& e : fs::directory_iterator(kSource / "include/npf"))
        files.push_back("include/npf/" + e.path().filename().string());
    static const std::regex re(R"((/sys/fs/bpf/npf|/run/npf)/([^\s`"')/]+)/)");
    for (const std::string& rel : files) {
        const Doc d = Doc::load(rel);
        for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), re); it != std::sregex_iterator(); ++it)
            if ((*it)[2].str().rfind("netns-", 0) != 0)
                ADD_FAILURE() << d.at(it->position()) << ": " << it->str()
                              << "...: npf's directories are keyed by network namespace: " << (*it)[1].str()
                              << "/netns-<inode>/<ifname>/ (include/npf/abi.h, NPF_PIN_ROOT)";
    }
}

// ---- links ------------------------------------------------------------------

// A file inside a build tree of the source directory, whatever its name
// (cmake -B dbg): a directory on its path holds a CMakeCache.txt.
bool inBuildTree(const std::string& rel)
{
    fs::path dir = kSource;
    const fs::path p(rel);
    for (auto it = p.begin(); it != p.end() && std::next(it) != p.end(); ++it) {
        dir /= *it;
        if (fs::exists(dir / "CMakeCache.txt"))
            return true;
    }
    return false;
}

// The repository's files: what git tracks or would (not what it ignores:
// build trees, editor caches), less build trees .gitignore does not name;
// without git, the tree minus build*/, build trees and .git.
std::vector<std::string> repoFiles()
{
    static const std::vector<std::string> files = [] {
        std::vector<std::string> out;
        const Output r = run("git -C '" + kSource.string() + "' ls-files --cached --others --exclude-standard");
        if (r.status == 0) {
            std::istringstream in(r.out);
            for (std::string l; std::getline(in, l);)
                if (!l.empty() && fs::is_regular_file(kSource / l) && !inBuildTree(l))
                    out.push_back(l);
        } else {
            for (auto it = fs::recursive_directory_iterator(kSource); it != fs::recursive_directory_iterator(); ++it) {
                const std::string n = it->path().filename().string();
                if (n == ".git" || n == "node_modules" ||
                    (it->is_directory() && (n.rfind("build", 0) == 0 || fs::exists(it->path() / "CMakeCache.txt")))) {
                    if (it->is_directory())
                        it.disable_recursion_pending();
                    continue;
                }
                if (it->is_regular_file())
                    out.push_back(fs::relative(it->path(), kSource).string());
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }();
    return files;
}

std::vector<std::string> allMarkdown()
{
    std::vector<std::string> out;
    for (const auto& f : repoFiles())
        if (fs::path(f).extension() == ".md")
            out.push_back(f);
    return out;
}

// Every relative link of every Markdown file resolves to a file of the
// repository, and its #anchor to a heading.
TEST(DocsLinks, RelativeLinksResolve)
{
    static const std::regex link(R"(\]\(([^)\s]+)\))");
    static const std::regex ref(R"((?:^|\n)\s*\[[^\]]+\]:\s*(\S+))");
    const fs::path root = fs::weakly_canonical(kSource);
    size_t checked = 0;
    for (const std::string& rel : allMarkdown()) {
        const Doc d = Doc::load(rel);
        const auto f = fences(d.text);
        const fs::path dir = (kSource / rel).parent_path();
        for (const std::regex* re : {&link, &ref})
            for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), *re); it != std::sregex_iterator();
                 ++it) {
                if (inFence(f, it->position()))
                    continue;
                const std::string target = (*it)[1];
                if (std::regex_search(target, std::regex("^[a-z]+:")))
                    continue; // http:, https:, mailto:
                checked++;
                const size_t hash = target.find('#');
                const std::string file = target.substr(0, hash);
                const fs::path p = file.empty() ? kSource / rel : fs::weakly_canonical(dir / file);
                const std::string rp = p.lexically_relative(root).string();
                if (!file.empty() && (rp.rfind("..", 0) == 0 || fs::path(file).is_absolute())) {
                    ADD_FAILURE() << d.at(it->position()) << ": link " << target
                                  << " leaves the repository: link only to files in it";
                    continue;
                }
                if (!fs::exists(p)) {
                    ADD_FAILURE() << d.at(it->position()) << ": link " << target << " -> " << rp
                                  << ", which does not exist: fix the path or remove the link";
                    continue;
                }
                if (hash != std::string::npos && p.extension() == ".md") {
                    const std::string anchor = target.substr(hash + 1);
                    if (!anchors(readFile(p)).count(anchor))
                        ADD_FAILURE() << d.at(it->position()) << ": link " << target << ": " << rp
                                      << " has no heading #" << anchor << " (a renamed heading?)";
                }
            }
    }
    EXPECT_GT(checked, 20u) << "the link pattern found almost no links";
}

// Nothing points outside the repository: no document of the folder beside
// the checkout (or of another checkout), no absolute path of this machine's
// checkouts (the checkout's parent directory, unless that is a system
// directory the docs name for its own sake, such as /tmp).
TEST(DocsLinks, NothingPointsOutside)
{
    const fs::path root = fs::weakly_canonical(kSource);
    const std::string parent = root.parent_path().string();
    // Spelled in pieces so that this file does not hold what it looks for.
    const std::string beside = std::string("sha") + "red";
    std::vector<std::string> needles = {"../" + beside, beside + "/DESIGN"};
    static const std::set<std::string> system = {"/", "/tmp", "/var/tmp", "/var", "/run", "/usr", "/opt", "/srv",
                                                 "/mnt", "/media", "/home", "/root", "/etc", "/dev", "/sys", "/proc"};
    if (!system.count(parent))
        needles.push_back(parent + "/"); // the folder that holds this checkout
    for (const std::string& rel : repoFiles()) {
        std::error_code ec;
        if (fs::file_size(kSource / rel, ec) > (64u << 20))
            continue;
        const Doc d{rel, readFile(kSource / rel)};
        if (d.text.find('\0') != std::string::npos)
            continue; // binary
        for (const auto& needle : needles) {
            const size_t p = d.text.find(needle);
            if (p != std::string::npos)
                ADD_FAILURE() << d.at(p) << ": \""
                              << d.text.substr(p, std::min<size_t>(d.text.find_first_of(" \n\"'`),", p) - p, 80))
                              << "\" points outside the repository (" << needle
                              << "): refer to a file in the repository, or use a path relative to it";
        }
    }
    EXPECT_GT(repoFiles().size(), 100u) << "found almost no files in " << kSource;
}

// ---- README -------------------------------------------------------------------

// The two commands a newcomer needs come first.
TEST(DocsReadme, DemoAndTestCommandsOnTop)
{
    const Doc d = Doc::load("README.md");
    const size_t top = d.text.find("\n## ");
    for (const char* cmd : {"sudo scripts/demo.sh", "sudo scripts/test.sh"}) {
        const size_t p = d.text.find(cmd);
        EXPECT_TRUE(p != std::string::npos && p < top)
            << "README.md: `" << cmd << "` belongs above the first section (the one command that runs it)";
        const std::string script = std::string(cmd).substr(5);
        EXPECT_EQ(::access((kSource / script).c_str(), X_OK), 0) << script << " is missing or not executable";
    }
}

// An arithmetic C++ size: 64ull << 20, 1ull << 30, 268435456, 8 * 1024 * 1024.
std::optional<unsigned long long> evalSize(std::string e)
{
    e.erase(std::remove(e.begin(), e.end(), ' '), e.end());
    static const std::regex num(R"(^(\d+)(?:ull|ULL|ul|UL|u|U|ll|LL)?)");
    std::smatch m;
    if (!std::regex_search(e, m, num))
        return std::nullopt;
    unsigned long long v = std::stoull(m[1]);
    std::string rest = m.suffix();
    while (!rest.empty()) {
        std::string op = rest.rfind("<<", 0) == 0 ? "<<" : rest.substr(0, 1);
        if (op != "<<" && op != "*")
            return std::nullopt;
        rest = rest.substr(op.size());
        if (!std::regex_search(rest, m, num))
            return std::nullopt;
        const unsigned long long r = std::stoull(m[1]);
        v = op == "<<" ? v << r : v * r;
        rest = m.suffix();
    }
    return v;
}

// The npf::Client examples ask for a region and a budget that every config
// the repository ships (deploy/, the samples in the docs, the demo) grants.
TEST(DocsReadme, ClientExampleFitsShippedConfigs)
{
    // The smallest limits of any shipped rule.
    static const std::regex regionRe(R"re("region_bytes"\s*:\s*(\d+))re"), residentRe(R"re("resident_bytes"\s*:\s*(\d+))re");
    unsigned long long minRegion = ~0ull, minResident = ~0ull;
    std::string regionFrom, residentFrom;
    std::vector<fs::path> configs;
    for (const char* dir : {"deploy", "docs", "scripts"})
        for (const auto& e : fs::recursive_directory_iterator(kSource / dir))
            if (e.is_regular_file() && e.path().string().find("/bench/") == std::string::npos)
                configs.push_back(e.path());
    configs.push_back(kSource / "README.md");
    for (const fs::path& p : configs) {
        const Doc d{fs::relative(p, kSource).string(), readFile(p)};
        for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), regionRe); it != std::sregex_iterator(); ++it)
            if (std::stoull((*it)[1]) < minRegion) {
                minRegion = std::stoull((*it)[1]);
                regionFrom = d.at(it->position());
            }
        for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), residentRe); it != std::sregex_iterator();
             ++it)
            if (std::stoull((*it)[1]) < minResident) {
                minResident = std::stoull((*it)[1]);
                residentFrom = d.at(it->position());
            }
    }
    ASSERT_NE(minRegion, ~0ull) << "no shipped config with region_bytes found";

    // The client examples: README's cpp blocks that construct an npf::Client, and client.h's.
    struct Example {
        Doc doc;
        size_t pos;
        std::string code;
    };
    std::vector<Example> examples;
    const Doc readme = Doc::load("README.md");
    for (const Fence& f : fences(readme.text))
        if (readme.text.find("npf::Client", f.begin) < f.end)
            examples.push_back({readme, f.begin, readme.text.substr(f.begin, f.end - f.begin)});
    const Doc header = Doc::load("include/npf/client.h");
    examples.push_back({header, 0, header.text.substr(0, header.text.find("#pragma"))});
    ASSERT_GE(examples.size(), 2u) << "README.md has no npf::Client example";
    for (const Example& ex : examples) {
        static const std::regex regionSize(R"(\.regionSize\s*=\s*([^,}]+))"), budget(R"(\.residentBudget\s*=\s*([^,}]+))");
        std::smatch m;
        const npf::ClientConfig defaults;
        unsigned long long region = defaults.regionSize, resident = defaults.residentBudget;
        size_t at = ex.pos;
        if (std::regex_search(ex.code, m, regionSize)) {
            auto v = evalSize(m[1]);
            ASSERT_TRUE(v) << ex.doc.at(ex.pos + m.position()) << ": cannot read .regionSize = " << m[1];
            region = *v;
            at = ex.pos + m.position();
        }
        if (std::regex_search(ex.code, m, budget)) {
            auto v = evalSize(m[1]);
            ASSERT_TRUE(v) << ex.doc.at(ex.pos + m.position()) << ": cannot read .residentBudget = " << m[1];
            resident = *v;
        }
        EXPECT_LE(region, minRegion) << ex.doc.at(at) << ": the example asks for a " << (region >> 20)
                                     << " MiB region, but the rule at " << regionFrom << " grants "
                                     << (minRegion >> 20) << " MiB: npfd refuses it (too_large); ask for less";
        EXPECT_LE(resident, minResident) << ex.doc.at(at) << ": the example asks for a " << (resident >> 20)
                                         << " MiB budget, but the rule at " << residentFrom << " grants "
                                         << (minResident >> 20) << " MiB: ask for less (or 0: what the rule allows)";
    }
}

// ---- benchmarks ---------------------------------------------------------------

// docs/BENCHMARKS.md: every table says when it was measured (a date) and on
// which CPU (its heading, or the text of a heading above it before the table,
// names both); the first table is the newest, the one the README quotes.
TEST(DocsBenchmarks, TablesDatedAndLabelled)
{
    const Doc d = Doc::load("docs/BENCHMARKS.md");
    const auto f = fences(d.text);
    const auto secs = sections(d.text);
    static const std::regex date(R"(\b(20\d\d-\d\d-\d\d)\b)");
    static const std::regex cpu(R"(AMD EPYC|Intel Xeon|EPYC|Xeon|Zen \d|ARM|Graviton|Ampere)");
    std::vector<std::pair<size_t, std::string>> tables; // position, date
    size_t pos = 0;
    bool inTable = false;
    while (pos < d.text.size()) {
        size_t eol = d.text.find('\n', pos);
        if (eol == std::string::npos)
            eol = d.text.size();
        const bool row = d.text.compare(pos, 1, "|") == 0 && !inFence(f, pos);
        if (row && !inTable) {
            // What the table's headings and their text before it say.
            std::string context = d.text.substr(pos, eol - pos); // its header row
            for (const Section& s : secs) {
                if (pos < s.begin || pos >= s.end)
                    continue;
                size_t upto = pos;
                for (const Section& c : secs)
                    if (c.begin > s.begin && c.begin < upto)
                        upto = c.begin; // the heading's own text, not its subsections'
                context += "\n" + d.text.substr(s.begin, upto - s.begin);
            }
            std::smatch m;
            // Its date: the first in the headings' text, outermost first (a
            // section's run; a subsection may cite an older measurement).
            const bool dated = std::regex_search(context, m, date);
            std::string when;
            if (dated)
                when = m[1].str();
            else
                ADD_FAILURE() << d.at(pos) << ": this table says nowhere when it was measured: give the date "
                              << "(YYYY-MM-DD) in its heading or the text above it";
            if (!std::regex_search(context, cpu))
                ADD_FAILURE() << d.at(pos) << ": this table says nowhere which CPU it ran on: name it in its "
                              << "heading or the text above it";
            tables.push_back({pos, when});
        }
        inTable = row;
        pos = eol + 1;
    }
    ASSERT_FALSE(tables.empty());
    std::string newest;
    for (const auto& [p, when] : tables)
        newest = std::max(newest, when);
    EXPECT_EQ(tables.front().second, newest)
        << d.at(tables.front().first) << ": the first table is of " << tables.front().second
        << ", but the file has newer numbers (" << newest
        << "): open with the current results, move older runs under History";
    const Doc readme = Doc::load("README.md");
    for (const Section& s : sections(readme.text))
        if (s.heading == "Benchmarks") {
            const std::string text = readme.text.substr(s.begin, s.end - s.begin);
            std::smatch m;
            if (std::regex_search(text, m, date)) {
                EXPECT_EQ(m[1].str(), tables.front().second)
                    << readme.at(s.begin + m.position()) << ": README's benchmark table is of " << m[1]
                    << ", docs/BENCHMARKS.md opens with " << tables.front().second << ": quote the same run";
            }
        }
}

// ---- npfctl for real ------------------------------------------------------------

struct Netns {
    std::string name = "npf-docs-" + std::to_string(::getpid());
    bool ok = false;
    Netns()
    {
        ok = std::system(("ip netns add " + name + " && ip -n " + name +
                          " link add veth0 type veth peer name veth1 && ip -n " + name + " link set veth0 up && ip -n " +
                          name + " link set veth1 up")
                             .c_str()) == 0;
    }
    ~Netns()
    {
        run(exec("detach --force veth0"));
        (void)std::system(("ip netns del " + name + " 2>/dev/null").c_str());
    }
    std::string exec(const std::string& args) const
    {
        return "nsenter --net=/run/netns/" + name + " " + NPFCTL_PATH + " " + args;
    }
};

// Digits as N, runs of blanks as one: the shape of an output line.
std::string shape(const std::string& l)
{
    std::string s = std::regex_replace(l, std::regex(R"(\d+(\.\d+)?)"), "N");
    s = std::regex_replace(s, std::regex(R"(\s+)"), " ");
    while (!s.empty() && s.back() == ' ')
        s.pop_back();
    return s;
}

// The lines npfctl prints, as docs/cli.md and README.md show them: a shown
// line that starts like a real one must have its shape. The maps npfctl pins
// are the maps the docs name.
TEST(DocsNpfctl, OutputAsShown)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root (attaches npf_xdp to a veth in a namespace of its own)";
    (void)std::system("mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf");
    Netns ns;
    if (!ns.ok)
        GTEST_SKIP() << "cannot create a network namespace with a veth pair";
    std::vector<std::string> lines;
    std::string pinDir;
    for (const char* args : {"attach veth0", "flow add veth0 5000", "flow list veth0", "status", "stats veth0",
                             "flow del veth0 5000", "detach veth0"}) {
        const Output r = run(ns.exec(args));
        ASSERT_EQ(r.status, 0) << "npfctl " << args << ":\n" << r.out;
        std::istringstream in(r.out);
        for (std::string l; std::getline(in, l);) {
            if (l.rfind("npf: ", 0) == 0)
                continue; // notes (npf: info: ...), not results
            lines.push_back(l);
            std::smatch m;
            if (std::regex_search(l, m, std::regex(R"(pins (/\S+))")) && pinDir.empty()) {
                pinDir = m[1];
                // The maps, while they are pinned.
            }
        }
        if (std::string(args) == "attach veth0") {
            ASSERT_FALSE(pinDir.empty()) << "attach printed no pin directory:\n" << r.out;
            std::set<std::string> pins;
            for (const auto& e : fs::directory_iterator(pinDir))
                pins.insert(std::regex_replace(e.path().filename().string(), std::regex(R"(^npf_regions_\d+$)"),
                                               "npf_regions_0"));
            for (const char* rel : {"docs/cli.md", "README.md"}) {
                const Doc d = Doc::load(rel);
                for (const auto& p : pins)
                    EXPECT_NE(d.text.find(p), std::string::npos)
                        << rel << " does not name the map " << p << ", which npfctl attach pins: list it";
            }
        }
    }
    for (const char* rel : {"docs/cli.md", "README.md"}) {
        const Doc d = Doc::load(rel);
        const auto f = fences(d.text);
        for (const Code& c : codeOf(d.text, f, 0, d.text.size())) {
            // Output is shown in fenced blocks, a table header also inline (`ID PORT ...`).
            const std::string w = firstWord(c.text);
            if (!c.fence && (w.size() < 2 || !std::all_of(w.begin(), w.end(), [](char ch) { return std::isupper(ch) || ch == '_'; })))
                continue;
            const std::string shown = std::regex_replace(shape(c.text), std::regex(R"(\b(veth|eth)N\b|\bIFACE\b)"), "IF");
            for (const std::string& real : lines) {
                const std::string want = std::regex_replace(shape(real), std::regex(R"(\bvethN\b)"), "IF");
                // The same kind of line: the same first two words. Rows of
                // tables (an interface, an id, a counter first) vary.
                std::istringstream a(want), b(shown);
                std::string a1, a2, b1, b2;
                a >> a1 >> a2;
                b >> b1 >> b2;
                if (a1.empty() || a1 == "IF" || a1 == "N" || a1.find('.') != std::string::npos || a1 != b1 || a2 != b2)
                    continue;
                if (want != shown)
                    ADD_FAILURE() << d.at(c.pos) << ": shows\n    " << c.text << "\nbut npfctl prints\n    " << real
                                  << "\nupdate the example";
            }
        }
    }
}

} // namespace
