// `kiln doctor [--json [FILE]]`: what this kiln was built with and what it finds on this machine
// (the library's DoctorReportJson(), kiln/diagnostics.h): build flags, the CPU and its ISA, and
// for CUDA the driver, libraries, GPUs and the GPU code in the plugin, with a verdict per GPU.
// A missing driver, library or GPU is a fact to print, not an error: doctor exits 0 unless the
// --json file cannot be written. The text report (doctor_text.cc) is printed from the same JSON,
// so the two never disagree.
#include "doctor.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common.h"
#include "kiln/diagnostics.h"

namespace kiln::cli {
namespace {

Status RunDoctor(const std::string& json_path, bool json_requested) {
  const std::string text = DoctorReportJson();
  const bool json_to_stdout = json_requested && (json_path.empty() || json_path == "-");
  if (!json_to_stdout) PrintDoctorReport(nlohmann::ordered_json::parse(text));
  if (!json_requested) return OkStatus();
  return WriteJsonReport(json_to_stdout ? "-" : json_path, text + "\n", stdout);
}

}  // namespace

void AddDoctorCommand(CLI::App& app, int* exit_code) {
  auto json_path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Report the build, the CPU and, for CUDA, the driver, libraries, GPUs and the GPU "
      "architectures in this binary");
  CLI::Option* json =
      cmd->add_option("--json", *json_path,
                      "Print the report as one JSON object (alone on stdout), or write it to FILE")
          ->expected(0, 1)
          ->option_text("[FILE]");
  cmd->callback([json_path, json, exit_code] {
    Status s = RunDoctor(*json_path, json->count() > 0);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
