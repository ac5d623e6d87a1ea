// Fixtures for plugin_deps_test.cc: libkiln_depdep.so is the "vendor library" a plugin needs,
// kept in a folder the loader does not search; libkiln_depplug_*.so need it (DT_NEEDED), one with
// no run path and one with run path $ORIGIN/../extra.
#ifdef KILN_DEPDEP
extern "C" int kiln_depdep_value() { return 42; }
#else
extern "C" int kiln_depdep_value();
extern "C" int kiln_depplug_value() { return kiln_depdep_value() + 1; }
#endif
