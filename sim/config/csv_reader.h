// The one reader of the CSV tables parasim takes beside a scenario or a
// validation dataset: serving traces (docs/serving.md) and expert histograms
// (docs/moe.md section 2). It owns what the formats share: the file checks
// (read_input_file: a regular file within the input-bytes limit), blank lines
// and '#' comments, the header, the field count, the row limit, and messages
// with file:line and the row as written. Each format checks its own fields.
#pragma once

#include "sim/core/error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sim::config {

// One data row of a CSV table.
struct CsvRow {
    SourceLocation where;             // file:line:1
    std::string shown;                // the row as written (trimmed), cut at 80 characters
    std::vector<std::string> fields;  // each trimmed of spaces, tabs and CR
    // ConfigError at `where`: "row 'SHOWN': WHY".
    [[noreturn]] void fail(const std::string& why) const;
};

// What a format asks of its table.
struct CsvFormat {
    std::vector<std::string> headers;  // the accepted headers, "a,b,c" each (a row has its header's field count)
    std::string kind;                  // names the file in messages: "trace", "histogram"
    std::string rows;                  // names its rows: "requests", "experts"
    std::int64_t max_rows = 0;         // more data rows than this are refused at the first one past it
    // When given, per header (in headers' order): its own row limit and name
    // for its rows, instead of max_rows and rows.
    std::vector<std::int64_t> header_max_rows = {};
    std::vector<std::string> header_rows = {};
};

// Reads `path` and calls `row` for each data row, in file order. Returns the
// index in format.headers of the file's header; `last_line` is set to the
// file's last line. Throws ConfigError (file:line) on a missing or wrong
// header, a row with the wrong field count, too many rows, or no rows.
std::size_t read_csv(const std::string& path, const CsvFormat& format, const std::function<void(const CsvRow&)>& row,
                     int& last_line);

// A finite number that is the whole field (no trailing characters).
bool parse_csv_number(const std::string& field, double& out);
// A whole number that is the whole field.
bool parse_csv_int(const std::string& field, std::int64_t& out);

// `ref` resolved beside the file `base` (a scenario or dataset): unchanged
// when absolute or when `base` has no folder.
std::string resolve_beside(const std::string& base, const std::string& ref);

}  // namespace sim::config
