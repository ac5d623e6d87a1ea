// `kiln doctor`'s text report, printed from the facts doctor.cc gathers as JSON (key names in
// doctor.cc; README "kiln doctor").
#pragma once

#include <nlohmann/json.hpp>

namespace kiln::cli {

// Prints the human-readable report of `report` to stdout, warnings last.
void PrintDoctorReport(const nlohmann::ordered_json& report);

}  // namespace kiln::cli
