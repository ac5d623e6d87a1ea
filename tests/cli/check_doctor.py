#!/usr/bin/python3
"""usage: check_doctor.py KILN CUDA_ENABLED(0|1) FAKE_DRIVER_DIR

Checks `kiln doctor --json`: it exits 0 and prints one JSON object with the documented keys; in a
CUDA build, the binary's fatbin holds exactly SASS sm_75/80/86/89/90 and PTX compute_90 (issue 5).
Then runs doctor against fake_libcuda.cc (a stand-in libcuda.so.1 with fake GPUs) to check the
per-GPU verdicts, the JIT cache advice and the loud driver messages without a real GPU.
Prints one line per check; exits 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile

KILN, CUDA, FAKE_DIR = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)))
    if not ok:
        failures.append(name)


def doctor(args=("--json",), env_extra=None, fake=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_CACHE", "FAKE_CUDA"))}
    if fake:
        env["LD_LIBRARY_PATH"] = FAKE_DIR + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    env.update(env_extra or {})
    p = subprocess.run([KILN, "doctor", *args], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


rc, out, err = doctor()
check("json-exit-0", rc == 0, err)
try:
    j = json.loads(out)
except ValueError as e:
    j = None
    check("json-parses", False, e)
if j is None:
    sys.exit(1)
check("json-parses", True)
keys = {
    "build": ["kiln_version", "compiler", "build_type", "onednn_version", "cuda_enabled",
              "cuda_toolkit", "cuda_architectures", "cudart_compiled", "cudnn_compiled",
              "cublas_compiled"],
    "cpu": ["model", "physical_cores", "logical_cpus", "isa", "onednn_isa", "bf16",
            "affinity_cpus", "cgroup_quota_cpus", "usable_cpus", "default_threads",
            "default_threads_reason"],
    "cuda": ["execution_available", "driver", "libraries", "binary", "jit_cache", "gpus"],
}
for section, names in keys.items():
    missing = [k for k in names if k not in j.get(section, {})]
    check("keys-" + section, not missing, missing)
check("keys-warnings", isinstance(j.get("warnings"), list))
cu = j["cuda"]
check("keys-libraries", sorted(cu["libraries"]) == ["cublas", "cudart", "cudnn"], cu["libraries"])
check("keys-jit-cache", all(k in cu["jit_cache"] for k in
                            ["CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_PATH",
                             "disabled", "max_bytes", "path", "writable"]), cu["jit_cache"])
check("cpu-sane", j["cpu"]["physical_cores"] >= 1 and isinstance(j["cpu"]["isa"], list), j["cpu"])
check("cuda-enabled-matches-build", j["build"]["cuda_enabled"] == CUDA, j["build"])
binary = cu["binary"]
check("binary-read", binary["error"] is None, binary["error"])
if CUDA:
    check("fatbin-sass", binary["sass"] == [75, 80, 86, 89, 90], binary["sass"])
    check("fatbin-ptx", binary["ptx"] == [90], binary["ptx"])
    check("fatbin-entries", all(e["kind"] in ("sass", "ptx") for e in binary["entries"]),
          binary["entries"])
    check("compiled-versions", j["build"]["cudart_compiled"] is not None)
else:
    check("cpu-only-no-fatbin", binary["sass"] == [] and binary["ptx"] == [], binary)
    check("cpu-only-said-loudly", any("built without CUDA" in w for w in j["warnings"]),
          j["warnings"])
if not cu["driver"]["loaded"]:
    check("no-driver-said-loudly",
          any("no NVIDIA driver found" in w for w in j["warnings"]), j["warnings"])

# --json FILE writes the same object; an unwritable FILE is the one failure (exit 11).
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "doctor.json")
    rc, out, _ = doctor(("--json", path))
    ok = rc == 0 and os.path.exists(path) and "kiln doctor" in out
    check("json-file", ok and json.load(open(path))["build"] == j["build"], (rc, out))
    rc, _, err = doctor(("--json", os.path.join(d, "missing", "x.json")))
    check("json-file-unwritable", rc == 11 and "cannot write" in err, (rc, err))

# A stand-in driver with GPUs of compute capability 8.6, 8.7, 12.0 and 7.0.
rc, out, err = doctor(env_extra={"FAKE_CUDA_DEVICES": "8.6,8.7,12.0,7.0"}, fake=True)
g = json.loads(out)["cuda"] if rc == 0 else {}
gpus = g.get("gpus", [])
check("fake-driver-loaded", rc == 0 and g["driver"]["loaded"] and g["driver"]["version"] == "13.0",
      (rc, err, g.get("driver")))
check("fake-gpus", [x["compute_capability"] for x in gpus] == ["8.6", "8.7", "12.0", "7.0"], gpus)
if CUDA and len(gpus) == 4:
    check("verdict-native-exact", gpus[0]["verdict"] == "native" and gpus[0]["sass_arch"] == 86,
          gpus[0])
    check("verdict-native-same-major", gpus[1]["verdict"] == "native" and
          gpus[1]["sass_arch"] == 86, gpus[1])
    check("verdict-ptx-jit", gpus[2]["verdict"] == "ptx_jit" and gpus[2]["ptx_arch"] == 90, gpus[2])
    check("verdict-unsupported", gpus[3]["verdict"] == "unsupported", gpus[3])
    check("ptx-jit-no-advice-by-default", gpus[2]["jit_cache_advice"] == [], gpus[2])
    rc, out, _ = doctor(env_extra={"FAKE_CUDA_DEVICES": "12.0", "CUDA_CACHE_MAXSIZE": "1000"},
                        fake=True)
    adv = json.loads(out)["cuda"]["gpus"][0]["jit_cache_advice"]
    check("advice-cache-too-small", any("does not fit CUDA_CACHE_MAXSIZE=1000" in a for a in adv),
          adv)
    rc, out, _ = doctor(args=(), env_extra={"FAKE_CUDA_DEVICES": "12.0", "CUDA_CACHE_DISABLE": "1"},
                        fake=True)
    check("advice-cache-disabled-text", rc == 0 and "unset CUDA_CACHE_DISABLE" in out and
          "PTX JIT needed" in out, out)
elif not CUDA:
    check("cpu-only-verdict", all(x["verdict"] == "cpu_only_build" for x in gpus), gpus)
rc, out, _ = doctor(args=(), env_extra={"FAKE_CUDA_INIT_ERROR": "100"}, fake=True)
check("driver-init-error-loud", rc == 0 and "CUDA_ERROR_NO_DEVICE" in out and
      "GPU execution unavailable" in out, out)
rc, out, _ = doctor(args=(), env_extra={"FAKE_CUDA_DEVICES": ""}, fake=True)
check("no-gpu-visible-loud", rc == 0 and "no GPU visible" in out, out)
if CUDA:
    rc, out, _ = doctor(args=(), env_extra={"FAKE_CUDA_VERSION": "12080"}, fake=True)
    check("old-driver-loud", rc == 0 and "update the NVIDIA driver" in out, out)

print("doctor: %d failed" % len(failures))
sys.exit(1 if failures else 0)
