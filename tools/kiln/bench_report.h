// `kiln bench --report FILE.html`: a sweep (--batch with several sizes, or --concurrency) as one
// self-contained HTML page with inline SVG charts (latency with its spread, throughput) and a
// table, drawn from the same document --json writes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kiln/status.h"

namespace kiln::cli {

StatusOr<std::string> SweepReportHtml(const nlohmann::ordered_json& j);
Status WriteSweepReport(const std::string& path, const nlohmann::ordered_json& j);

}  // namespace kiln::cli
