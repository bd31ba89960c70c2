// Reads an exported audit file line by line for the verifier: plain JSONL or
// gzip (a rotated file), told apart by its content (zlib reads both).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace zn::broker::audit_export {

// Calls fn with each line (no newline) in order; stops when fn returns
// false. Throws std::runtime_error naming the path if it cannot be read or
// is corrupt (a bad gzip stream). A line longer than max_line bytes is an
// error too (a hostile file cannot make the reader hold it all).
void read_export_lines(const std::string& path, const std::function<bool(std::string_view)>& fn,
                       size_t max_line = 8u << 20);

}  // namespace zn::broker::audit_export
