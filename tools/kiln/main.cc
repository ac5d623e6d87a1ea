// The `kiln` command: one binary, one subcommand per file.
#include <CLI/CLI.hpp>

#include "common.h"

namespace kiln::cli {
void AddInspectCommand(CLI::App& app, int* exit_code);
void AddRunCommand(CLI::App& app, int* exit_code);
void AddOpsCommand(CLI::App& app, int* exit_code);
void AddBenchCommand(CLI::App& app, int* exit_code);
void AddDoctorCommand(CLI::App& app, int* exit_code);
void AddSelftestCommand(CLI::App& app, int* exit_code);
void AddServeCommand(CLI::App& app, int* exit_code);
void AddQuantizeCommand(CLI::App& app, int* exit_code);
}  // namespace kiln::cli

int main(int argc, char** argv) {
  CLI::App app{"kiln: an offline inference engine for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  int exit_code = 0;
  kiln::cli::AddInspectCommand(app, &exit_code);
  kiln::cli::AddRunCommand(app, &exit_code);
  kiln::cli::AddOpsCommand(app, &exit_code);
  kiln::cli::AddBenchCommand(app, &exit_code);
  kiln::cli::AddDoctorCommand(app, &exit_code);
  kiln::cli::AddSelftestCommand(app, &exit_code);
  kiln::cli::AddServeCommand(app, &exit_code);
  kiln::cli::AddQuantizeCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 1;
  }
  return exit_code;
}
