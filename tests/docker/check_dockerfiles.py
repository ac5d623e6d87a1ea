#!/usr/bin/env python3
"""Static checks of kiln's container recipes (docker/Dockerfile.*), which Docker cannot build here.

usage: check_dockerfiles.py [DOCKER_DIR]   (default: the repository's docker/ folder)

For every Dockerfile.* in DOCKER_DIR:
  - every FROM names a pinned image: a digest (@sha256:...), or a tag that is not `latest` and
    carries a version number (`12.11-slim`, `bookworm-20251117-slim`, `13.0.2-cudnn-...`); a bare
    name or a codename tag (`bookworm-slim`) floats. Build arguments in FROM are resolved from the
    ARG defaults declared before the first FROM; FROM <earlier stage> is allowed;
  - there is more than one stage;
  - the final stage switches to a USER that is not root (not `root`, not uid 0) and never back;
  - the final stage has a HEALTHCHECK whose command runs `kiln doctor`;
  - the final stage copies in the release tarball (kiln-<version>-linux-x86_64.tar.gz);
  - the final stage's ENTRYPOINT runs kiln.
Before that, the checker is run on Dockerfile texts that break each rule, to show it fails on them.
Prints one line per check and exits 1 on any failure. Standard library only.
"""
import json
import os
import re
import shlex
import sys

_FROM_ARG_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_TARBALL_RE = re.compile(r"kiln-[^/\s]*-linux-x86_64\.tar\.gz$")
_DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


def parse_instructions(text):
    """Dockerfile text -> [(INSTRUCTION, arguments)], continuation lines joined, comments dropped."""
    escape = "\\"
    lines = text.splitlines()
    # A parser directive `# escape=`` ` at the top changes the continuation character.
    for line in lines:
        m = re.match(r"#\s*escape\s*=\s*(\S)\s*$", line)
        if m:
            escape = m.group(1)
            break
        if not line.startswith("#"):
            break
    out, current = [], ""
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith(escape):
            current += stripped[:-1] + " "
            continue
        current += stripped
        if current.strip():
            word, _, rest = current.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        current = ""
    if current.strip():
        word, _, rest = current.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def command_words(args):
    """The argv of an exec-form (JSON array) or shell-form command."""
    if args.startswith("["):
        try:
            words = json.loads(args)
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                return words
        except ValueError:
            pass
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def runs_kiln(words, subcommand=None):
    """True when the command starts kiln (possibly through `sh -c`), with `subcommand` if given."""
    if len(words) >= 3 and os.path.basename(words[0]) in ("sh", "bash") and words[1] == "-c":
        return runs_kiln(command_words(words[2]), subcommand)
    if not words or os.path.basename(words[0]) != "kiln":
        return False
    return subcommand is None or subcommand in words[1:]


def check_image_pinned(ref, stage_names):
    """'' when `ref` (an image reference after ARG substitution) is pinned, else the reason."""
    if ref.lower() in stage_names or ref == "scratch":
        return ""
    if _DIGEST_RE.search(ref):
        return ""
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"'{ref}' has no tag (it means :latest)"
    tag = last.split(":", 1)[1]
    if tag.lower() == "latest":
        return f"'{ref}' uses the floating tag 'latest'"
    if not re.search(r"\d", tag):
        return f"'{ref}' has tag '{tag}', a name that floats, not a version"
    return ""


def check_dockerfile(text):
    """Returns (stage count, [failure messages]) for one Dockerfile's text."""
    failures = []
    instructions = parse_instructions(text)
    global_args = {}
    stages = []  # each: {"name", "image", "instructions": [...]}
    for word, args in instructions:
        if word == "FROM":
            parts = args.split()
            parts = [p for p in parts if not p.startswith("--platform")]
            if not parts:
                failures.append("FROM without an image")
                continue
            image = parts[0]
            name = parts[2].lower() if len(parts) >= 3 and parts[1].lower() == "as" else ""
            stages.append({"name": name, "image": image, "instructions": []})
        elif not stages:
            if word == "ARG":
                key, _, value = args.partition("=")
                global_args[key.strip()] = value.strip().strip('"').strip("'")
        else:
            stages[-1]["instructions"].append((word, args))

    if not stages:
        return 0, ["no FROM instruction"]

    # Base images pinned.
    names_so_far = set()
    for i, stage in enumerate(stages):
        unresolved = []

        def resolve(m):
            key = m.group(1) or m.group(2)
            if global_args.get(key):
                return global_args[key]
            unresolved.append(key)
            return m.group(0)

        ref = _FROM_ARG_RE.sub(resolve, stage["image"])
        if unresolved:
            failures.append(f"stage {i + 1}: FROM {stage['image']}: build argument(s) "
                            f"{', '.join(unresolved)} have no default before the first FROM")
        else:
            reason = check_image_pinned(ref, names_so_far)
            if reason:
                failures.append(f"stage {i + 1}: FROM {reason}")
        if stage["name"]:
            names_so_far.add(stage["name"])

    if len(stages) < 2:
        failures.append(f"one stage only (FROM {stages[0]['image']}); a multi-stage build is required")

    final = stages[-1]["instructions"]
    # Non-root user: the last USER of the final stage decides.
    users = [args for word, args in final if word == "USER"]
    if not users:
        failures.append("the final stage has no USER: the container would run as root")
    else:
        user = users[-1].split(":", 1)[0].strip()
        if user in ("root", "0") or user.startswith("$"):
            failures.append(f"the final stage's last USER is '{users[-1]}', not a fixed non-root user")

    # Health check running `kiln doctor`.
    checks = [args for word, args in final if word == "HEALTHCHECK"]
    if not checks:
        failures.append("the final stage has no HEALTHCHECK")
    else:
        args = checks[-1]
        m = re.search(r"(?:^|\s)CMD\s+(.*)$", args, re.IGNORECASE)
        if args.strip().upper() == "NONE" or not m:
            failures.append(f"HEALTHCHECK '{args}' runs no command")
        elif not runs_kiln(command_words(m.group(1).strip()), "doctor"):
            failures.append(f"HEALTHCHECK '{args}' does not run `kiln doctor`")

    # The release tarball copied into the final stage.
    copied = False
    for word, args in final:
        if word not in ("COPY", "ADD"):
            continue
        words = command_words(args)
        sources = [w for w in words if not w.startswith("--")][:-1]
        if any(_TARBALL_RE.search(s) for s in sources):
            copied = True
    if not copied:
        failures.append("the final stage does not COPY/ADD the release tarball "
                        "(kiln-<version>-linux-x86_64.tar.gz)")

    entrypoints = [args for word, args in final if word == "ENTRYPOINT"]
    if not entrypoints or not runs_kiln(command_words(entrypoints[-1])):
        failures.append("the final stage's ENTRYPOINT does not run kiln")
    return len(stages), failures


# Texts that break the rules, with the failures each must produce (substrings of the messages).
_GOOD = """\
ARG BASE=12.11-slim
FROM debian:${BASE} AS build
RUN make-tarball
FROM debian:${BASE}
COPY --from=build /src/dist/kiln-*-linux-x86_64.tar.gz /tmp/
RUN tar -xzf /tmp/kiln-*.tar.gz -C /opt
USER kiln
HEALTHCHECK --interval=5m CMD kiln doctor
ENTRYPOINT ["kiln"]
"""
_BAD_CASES = [
    ("latest tag, one stage, root, no health check, no tarball",
     "FROM debian:latest\nRUN apt-get install -y kiln\nENTRYPOINT [\"kiln\"]\n",
     ["floating tag 'latest'", "one stage only", "no USER", "no HEALTHCHECK", "release tarball"]),
    ("untagged and codename-tagged bases",
     _GOOD.replace("FROM debian:${BASE} AS build", "FROM debian AS build")
          .replace("FROM debian:${BASE}\n", "FROM debian:bookworm-slim\n"),
     ["has no tag", "a name that floats"]),
    ("USER root / 0 in the final stage, after a non-root USER",
     _GOOD.replace("USER kiln\n", "USER kiln\nUSER 0:0\n"),
     ["not a fixed non-root user"]),
    ("a non-root USER only in the build stage",
     _GOOD.replace("RUN make-tarball\n", "USER builder\nRUN make-tarball\n").replace("USER kiln\n", ""),
     ["no USER"]),
    ("a health check that is not kiln doctor, an ENTRYPOINT that is not kiln",
     _GOOD.replace("CMD kiln doctor", "CMD [\"true\"]").replace('ENTRYPOINT ["kiln"]', "ENTRYPOINT [\"sh\"]"),
     ["does not run `kiln doctor`", "ENTRYPOINT does not run kiln"]),
    ("HEALTHCHECK NONE",
     _GOOD.replace("HEALTHCHECK --interval=5m CMD kiln doctor", "HEALTHCHECK NONE"),
     ["runs no command"]),
    ("an ARG default of latest, and an ARG without a default",
     "ARG TAG=latest\nARG OTHER\nFROM debian:${TAG} AS build\nFROM debian:$OTHER\n" + _GOOD.split("\n", 4)[4],
     ["floating tag 'latest'", "OTHER have no default"]),
    ("the tarball copied only into the build stage",
     _GOOD.replace("RUN make-tarball\n", "COPY kiln-0.1.0-linux-x86_64.tar.gz /tmp/\n")
          .replace("COPY --from=build /src/dist/kiln-*-linux-x86_64.tar.gz /tmp/\n", ""),
     ["release tarball"]),
]
_GOOD_CASES = [
    ("the reference text", _GOOD),
    ("digest-pinned bases, exec-form health check through sh -c",
     _GOOD.replace("debian:${BASE} AS build", "debian@sha256:" + "a" * 64 + " AS build")
          .replace("CMD kiln doctor", 'CMD ["sh", "-c", "/opt/kiln/bin/kiln doctor > /dev/null"]')),
]


def self_test():
    """The checker against texts with known verdicts. Returns the number of wrong verdicts."""
    wrong = 0
    for label, text, expected in _BAD_CASES:
        _, failures = check_dockerfile(text)
        joined = "\n".join(failures)
        missing = [e for e in expected if e not in joined]
        if missing:
            wrong += 1
            print(f"FAIL self-test '{label}': expected failures {missing}; got {failures}")
        else:
            print(f"ok: self-test rejects {label} ({len(failures)} failures)")
    for label, text in _GOOD_CASES:
        _, failures = check_dockerfile(text)
        if failures:
            wrong += 1
            print(f"FAIL self-test '{label}' should pass; got {failures}")
        else:
            print(f"ok: self-test accepts {label}")
    return wrong


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    docker_dir = argv[1] if len(argv) > 1 else os.path.join(here, "..", "..", "docker")
    failed = self_test()
    passed = len(_BAD_CASES) + len(_GOOD_CASES) - failed
    files = sorted(f for f in os.listdir(docker_dir) if f.startswith("Dockerfile."))
    if not files:
        print(f"FAIL: no Dockerfile.* in {docker_dir}")
        failed += 1
    for f in files:
        with open(os.path.join(docker_dir, f), encoding="utf-8") as fh:
            stages, failures = check_dockerfile(fh.read())
        if failures:
            failed += 1
            for msg in failures:
                print(f"FAIL {f}: {msg}")
        else:
            passed += 1
            print(f"ok: {f}: {stages} stages, bases pinned, non-root USER, HEALTHCHECK kiln doctor, "
                  f"release tarball, ENTRYPOINT kiln")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
