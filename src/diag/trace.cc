// ChromeTraceJson (include/kiln/diagnostics.h): runs timed per step, as the Trace Event Format
// that chrome://tracing and ui.perfetto.dev open. Complete events ("ph": "X", microseconds):
// one per run and one per step, on the thread that ran them (pid 1 is the process), ordered by
// time; metadata events name the process and each thread.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/diagnostics.h"

namespace kiln {

std::string ChromeTraceJson(const std::vector<RunTimings>& runs, const std::string& process_name) {
  using Json = nlohmann::json;
  Json events = Json::array();
  double origin = 0;
  bool first = true;
  for (const RunTimings& r : runs)
    if (r.per_node && (first || r.start_us < origin)) {
      origin = r.start_us;
      first = false;
    }
  std::set<int> threads;
  int index = 0;
  for (const RunTimings& r : runs) {
    if (!r.per_node) continue;
    ++index;
    threads.insert(r.thread);
    double end = r.start_us;
    for (const NodeTime& n : r.nodes) end = std::max(end, n.start_us + n.ms * 1000.0);
    events.push_back(Json::object({{"name", "run " + std::to_string(index)},
                                   {"cat", "run"},
                                   {"ph", "X"},
                                   {"ts", r.start_us - origin},
                                   {"dur", end - r.start_us},
                                   {"pid", 1},
                                   {"tid", r.thread},
                                   {"args", {{"steps", r.nodes.size()}}}}));
    for (const NodeTime& n : r.nodes) {
      const std::string name = n.node.empty() ? n.op_type : n.op_type + " " + n.node;
      events.push_back(Json::object({{"name", name},
                                     {"cat", n.kernel},
                                     {"ph", "X"},
                                     {"ts", n.start_us - origin},
                                     {"dur", n.ms * 1000.0},
                                     {"pid", 1},
                                     {"tid", r.thread},
                                     {"args",
                                      {{"node", n.node},
                                       {"op", n.op_type},
                                       {"kernel", n.kernel},
                                       {"outputs", n.outputs},
                                       {"run", index}}}}));
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const Json& a, const Json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  events.insert(
      events.begin(),
      Json::object(
          {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", process_name}}}}));
  for (int t : threads)
    events.insert(events.begin() + 1,
                  Json::object({{"name", "thread_name"},
                                {"ph", "M"},
                                {"pid", 1},
                                {"tid", t},
                                {"args", {{"name", "run thread " + std::to_string(t)}}}}));
  Json doc = Json::object({{"traceEvents", events}, {"displayTimeUnit", "ms"}});
  return doc.dump(1);
}

}  // namespace kiln
