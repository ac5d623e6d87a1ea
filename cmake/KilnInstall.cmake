# `cmake --install`: the kiln program, libkiln.so and libkiln.a, the CUDA plugin, the public
# headers, the CMake package (find_package(kiln): kiln::kiln, kiln::kiln_static) and kiln.pc.
#   <prefix>/bin/kiln                       run path $ORIGIN/../lib
#   <prefix>/lib/libkiln.so.<M.m>           and its links; libkiln.a
#   <prefix>/lib/libkiln_cuda.so            next to libkiln.so, where the runtime looks for it
#   <prefix>/include/kiln/*.h               the public API (src/ is not installed)
#   <prefix>/lib/cmake/kiln/                kilnConfig.cmake, kilnConfigVersion.cmake, targets
#   <prefix>/lib/pkgconfig/kiln.pc
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS kiln_shared EXPORT kilnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS kiln_static EXPORT kilnStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT static
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET kiln_cuda)
  install(TARGETS kiln_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
endif()
file(GLOB _kiln_public_headers ${PROJECT_SOURCE_DIR}/include/kiln/*.h)
install(FILES ${_kiln_public_headers} ${PROJECT_BINARY_DIR}/include/kiln/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT devel)

install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR}
        COMPONENT devel)
install(EXPORT kilnStaticTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR}
        COMPONENT static)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR} COMPONENT devel)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT devel)
