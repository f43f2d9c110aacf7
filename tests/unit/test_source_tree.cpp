// The source tree stands on its own: every document a file names is in the repository (a
// clone holds nothing else), and includes run one way through the layers (docs/design.md,
// "Layers"): core at the bottom, pm and tree over it, fmm over tree, ic and analysis over
// core and pm, and nothing of those includes the layers above it.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = fs::path(ORBIS_SOURCE_DIR);

// The repository's files, relative to its root: git's list (tracked, plus new files git
// does not ignore) when the source is a git checkout, else a walk that skips what git
// would ignore here (build and output folders, hidden folders but .ci).
std::vector<fs::path> repository_files() {
  std::vector<fs::path> files;
  const std::string command = "git -C '" + kRoot.string() +
                              "' ls-files --cached --others --exclude-standard 2>/dev/null";
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, pipe)) {
      std::string name(line);
      while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
      if (!name.empty() && fs::is_regular_file(kRoot / name)) files.emplace_back(name);
    }
    ::pclose(pipe);
  }
  if (!files.empty()) return files;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    const bool top = it.depth() == 0;
    if (it->is_directory() && ((name[0] == '.' && name != ".ci") ||
                               (top && (name.rfind("build", 0) == 0 || name.rfind("output", 0) == 0)))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(fs::relative(it->path(), kRoot));
  }
  return files;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
bool is_text(const std::string& content) {
  return content.find('\0', 0) == std::string::npos;
}

// Names that only exist beside a developer's checkout, never in a clone.
const std::vector<std::string> kOutsideNames = {
    "../" "shared", "shared/" "device", "papers" "/", "wang2021" "-", "unpack" "-debs",
    "fetch" "-debs"};

// Problems in `content` of the file `file` (relative to `root`): a *.md it names that is
// neither under the root nor beside the file, and any of kOutsideNames. "path:line: why".
std::vector<std::string> dangling_references(const fs::path& root, const fs::path& file,
                                             const std::string& content) {
  static const std::regex markdown(R"([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b)");
  std::vector<std::string> found;
  std::istringstream lines(content);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = file.string() + ":" + std::to_string(number) + ": ";
    for (std::sregex_iterator m(line.begin(), line.end(), markdown), end; m != end; ++m) {
      std::string name = m->str();
      if (name[0] == '/') name.erase(0, 1);   // a leading slash: from the root (Markdown links)
      const fs::path beside = (root / file).parent_path() / name;
      const bool inside = fs::is_regular_file(root / name) ||
                          (fs::is_regular_file(beside) &&
                           fs::weakly_canonical(beside).string().rfind(fs::weakly_canonical(root).string(), 0) == 0);
      if (!inside) found.push_back(where + name + " is not in the repository");
    }
    for (const std::string& outside : kOutsideNames)
      if (line.find(outside) != std::string::npos)
        found.push_back(where + "\"" + outside + "\" points outside the repository");
  }
  return found;
}

// The layer of a source file by its folder ("" for files no rule covers), and the layers
// each may include ("X/..." include paths; "orbis" is the generated build_info.hpp).
std::string layer_of(const fs::path& file) {
  const std::string s = file.generic_string();
  for (const char* dir : {"src/core/", "src/cosmology/", "src/io/", "src/pm/", "src/tree/",
                          "src/fmm/", "ic/", "analysis/"})
    if (s.rfind(dir, 0) == 0) {
      std::string d(dir);
      if (d.rfind("src/", 0) == 0) d = d.substr(4);
      return d.substr(0, d.size() - 1);
    }
  return "";
}
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"core", {"core", "cosmology", "io", "orbis"}},
    {"cosmology", {"core", "cosmology", "io", "orbis"}},
    {"io", {"core", "cosmology", "io", "orbis"}},
    {"pm", {"core", "cosmology", "io", "pm"}},
    {"tree", {"core", "cosmology", "io", "tree"}},
    {"fmm", {"core", "cosmology", "io", "tree", "fmm"}},
    {"ic", {"core", "cosmology", "io", "pm", "ic"}},
    {"analysis", {"core", "cosmology", "io", "pm", "analysis"}},
};

std::vector<std::string> upward_includes(const fs::path& file, const std::string& content) {
  std::vector<std::string> found;
  const std::string layer = layer_of(file);
  if (layer.empty()) return found;
  static const std::regex include(R"re(^\s*#\s*include\s*"([A-Za-z0-9_]+)/)re");
  std::istringstream lines(content);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::smatch m;
    if (std::regex_search(line, m, include) && !kMayInclude.at(layer).count(m[1].str()))
      found.push_back(file.string() + ":" + std::to_string(number) + ": " + layer + " includes " +
                      m[1].str() + "/, a layer above it");
  }
  return found;
}

}  // namespace

TEST_CASE("the checks catch what they look for") {
  const fs::path file = "src/core/units.hpp";   // exists; its folder holds no .md
  const std::string text =
      "// see DESIGN" ".md and docs/nothing_here" ".md\n"
      "// fine: README" ".md, params/README" ".md, docs/design" ".md\n"
      "# ../" "shared/x and papers" "/y.txt\n";
  const auto found = dangling_references(kRoot, file, text);
  REQUIRE(found.size() == 4);
  CHECK(found[0] == "src/core/units.hpp:1: DESIGN" ".md is not in the repository");
  CHECK(found[1] == "src/core/units.hpp:1: docs/nothing_here" ".md is not in the repository");
  CHECK(found[2].find(":3: \"../" "shared\"") != std::string::npos);
  CHECK(found[3].find(":3: \"papers" "/\"") != std::string::npos);

  const auto up = upward_includes("src/tree/x.hpp", "#include \"core/vec3.hpp\"\n#include \"fmm/tasks.hpp\"\n");
  REQUIRE(up.size() == 1);
  CHECK(up[0] == "src/tree/x.hpp:2: tree includes fmm/, a layer above it");
  CHECK(upward_includes("src/fmm/x.hpp", "#include \"tree/orb_tree.hpp\"\n").empty());
  CHECK(upward_includes("ic/x.cpp", "#include \"analysis/fof.hpp\"\n").size() == 1);
  CHECK(upward_includes("src/gpu/x.cu", "#include \"integrate/step_engine.hpp\"\n").empty());
}

TEST_CASE("no file names a document outside the repository, and includes run one way") {
  const auto files = repository_files();
  std::size_t scanned = 0;
  bool saw_readme = false, saw_tree = false;
  std::vector<std::string> problems;
  for (const fs::path& file : files) {
    const std::string content = read_text(kRoot / file);
    if (!is_text(content)) continue;
    ++scanned;
    saw_readme = saw_readme || file == "README.md";
    saw_tree = saw_tree || file == "src/tree/orb_tree.hpp";
    for (auto& p : dangling_references(kRoot, file, content)) problems.push_back(p);
    for (auto& p : upward_includes(file, content)) problems.push_back(p);
  }
  INFO("scanned " << scanned << " text files under " << kRoot.string());
  REQUIRE(scanned > 100);   // not vacuous: the repository was found and read
  CHECK(saw_readme);
  CHECK(saw_tree);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  INFO(all);
  CHECK(problems.empty());
}
