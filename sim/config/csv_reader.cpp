// The shared CSV reader (see csv_reader.h).
#include "sim/config/csv_reader.h"

#include "sim/config/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

namespace sim::config {

namespace {

std::string trim(const std::string& s) {
    const auto a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// The first `most` fields of `row` (a hostile line of a million commas
// allocates no million strings; the caller counts the commas).
std::vector<std::string> split(const std::string& row, std::size_t most) {
    std::vector<std::string> fields;
    std::size_t a = 0;
    while (fields.size() < most) {
        const std::size_t c = row.find(',', a);
        fields.push_back(trim(row.substr(a, c == std::string::npos ? std::string::npos : c - a)));
        if (c == std::string::npos) break;
        a = c + 1;
    }
    return fields;
}

std::string quoted_list(const std::vector<std::string>& headers) {
    std::string s;
    for (std::size_t i = 0; i < headers.size(); ++i)
        s += (i == 0 ? "'" : i + 1 == headers.size() ? " or '" : ", '") + headers[i] + "'";
    return s;
}

}  // namespace

void CsvRow::fail(const std::string& why) const { throw ConfigError(where, fmt::format("row '{}': {}", shown, why)); }

std::size_t read_csv(const std::string& path, const CsvFormat& format, const std::function<void(const CsvRow&)>& row,
                     int& last_line) {
    const std::string text = read_input_file(path);
    std::vector<std::vector<std::string>> headers;
    std::size_t widest = 0;
    for (const auto& h : format.headers) {
        headers.push_back(split(h, h.size() + 1));
        widest = std::max(widest, headers.back().size());
    }
    std::size_t pos = 0;
    int line = 0;
    std::size_t header = headers.size();
    std::int64_t count = 0;
    CsvRow r;
    while (pos < text.size()) {
        std::size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string trimmed = trim(text.substr(pos, eol - pos));
        pos = eol + 1;
        ++line;
        if (trimmed.empty() || trimmed.front() == '#') continue;
        r.where = SourceLocation{path, line, 1};
        r.shown = trimmed.size() > 80 ? trimmed.substr(0, 80) + "..." : trimmed;
        const auto commas = static_cast<std::size_t>(std::count(trimmed.begin(), trimmed.end(), ','));
        r.fields = split(trimmed, widest + 1);
        if (header == headers.size()) {
            for (std::size_t i = 0; i < headers.size() && header == headers.size(); ++i)
                if (r.fields == headers[i]) header = i;
            if (header == headers.size())
                throw ConfigError(
                    r.where, fmt::format("expected the header {}, got '{}'", quoted_list(format.headers), r.shown));
            continue;
        }
        const std::size_t want = headers[header].size();
        if (commas + 1 != want) r.fail(fmt::format("expected {} fields, got {}", want, commas + 1));
        const bool own = header < format.header_max_rows.size() && header < format.header_rows.size();
        const std::int64_t max_rows = own ? format.header_max_rows[header] : format.max_rows;
        if (count >= max_rows)
            throw ConfigError(r.where,
                              fmt::format("more than {} {}", max_rows, own ? format.header_rows[header] : format.rows));
        ++count;
        row(r);
    }
    last_line = line;
    if (header == headers.size())
        throw ConfigError(SourceLocation{path, 1, 1}, fmt::format("empty {}: expected the header {} and rows",
                                                                  format.kind, quoted_list(format.headers)));
    if (count == 0)
        throw ConfigError(SourceLocation{path, line, 1},
                          fmt::format("the {} has a header but no {}", format.kind, format.rows));
    return header;
}

bool parse_csv_number(const std::string& f, double& out) {
    if (f.empty()) return false;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), out);
    return ec == std::errc{} && end == f.data() + f.size() && std::isfinite(out);
}

bool parse_csv_int(const std::string& f, std::int64_t& out) {
    if (f.empty()) return false;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), out);
    return ec == std::errc{} && end == f.data() + f.size();
}

std::string resolve_beside(const std::string& base, const std::string& ref) {
    if (ref.empty() || ref.front() == '/') return ref;
    const auto dir = std::filesystem::path(base).parent_path();
    return dir.empty() ? ref : (dir / ref).string();
}

}  // namespace sim::config
