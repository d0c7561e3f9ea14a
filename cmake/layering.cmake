# The folder layering, low to high; a folder may include only the folders
# listed for it (docs/runtime.md, "Layering"). Used two ways:
#   include(cmake/layering.cmake) then lockstep_check_layering(TARGET FOLDER):
#     the build of TARGET fails when a source of FOLDER includes a header of a
#     folder it may not use;
#   cmake -DFOLDER=f -DDIR=d -DSTAMP=s -P cmake/layering.cmake:
#     the check itself (what the build runs; tests/layering runs it too).
# An include's folder is engine/ops, engine/io or engine/tokenizer for those
# subfolders, else its first path component; includes of anything that is
# not one of these folders (system and third-party headers) are not checked.

set(LOCKSTEP_LAYERS base engine/ops engine/io engine/tokenizer engine keys wire receipt
    worker coordinator runtime server cli)

set(LOCKSTEP_ALLOWED_base base)
set(LOCKSTEP_ALLOWED_engine/ops base engine/ops)
set(LOCKSTEP_ALLOWED_engine/io base engine/io)
set(LOCKSTEP_ALLOWED_engine/tokenizer base engine/tokenizer)
set(LOCKSTEP_ALLOWED_engine base engine/ops engine/io engine)
set(LOCKSTEP_ALLOWED_keys base keys)
set(LOCKSTEP_ALLOWED_wire base keys wire)
set(LOCKSTEP_ALLOWED_receipt base engine/ops engine/io engine keys receipt)
set(LOCKSTEP_ALLOWED_worker base engine/ops engine/io engine keys wire receipt worker)
set(LOCKSTEP_ALLOWED_coordinator base engine/ops engine/io engine keys wire receipt coordinator)
# runtime runs the worker only as a process (the `lockstep worker` binary).
set(LOCKSTEP_ALLOWED_runtime base engine/ops engine/io engine/tokenizer engine keys wire receipt
    coordinator runtime)
set(LOCKSTEP_ALLOWED_server base engine/ops engine/io engine/tokenizer engine keys wire receipt
    worker coordinator runtime server)
set(LOCKSTEP_ALLOWED_cli ${LOCKSTEP_LAYERS})

# Headers a folder must not reach at all, directly or through another
# header: the script below refuses a direct include, and the build of the
# folder's target finds a stand-in for each that fails with #error before
# the real one. The HTTP layer never compiles against ZeroMQ
# (coordinator.h keeps it behind a pimpl).
set(LOCKSTEP_FORBIDDEN_HEADERS_server zmq.hpp zmq.h zmq_addon.hpp)

# The folder an include path belongs to, or "" if it is not one of ours.
function(_lockstep_include_folder path out)
  set(folder "")
  if(path MATCHES "^engine/(ops|io|tokenizer)/")
    set(folder "engine/${CMAKE_MATCH_1}")
  elseif(path MATCHES "^([a-z_]+)/")
    list(FIND LOCKSTEP_LAYERS "${CMAKE_MATCH_1}" at)
    if(at GREATER -1)
      set(folder "${CMAKE_MATCH_1}")
    endif()
  endif()
  set(${out} "${folder}" PARENT_SCOPE)
endfunction()

function(lockstep_check_layering target folder)
  if(NOT DEFINED LOCKSTEP_ALLOWED_${folder})
    message(FATAL_ERROR "layering: folder '${folder}' has no entry in cmake/layering.cmake")
  endif()
  set(dir ${CMAKE_SOURCE_DIR}/${folder})
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.h ${dir}/*.cc ${dir}/*.capnp)
  string(REPLACE "/" "_" tag "${folder}")
  set(stamp ${CMAKE_BINARY_DIR}/layering/${tag}.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DFOLDER=${folder} -DDIR=${dir} -DSTAMP=${stamp}
            -P ${CMAKE_SOURCE_DIR}/cmake/layering.cmake
    DEPENDS ${sources} ${CMAKE_SOURCE_DIR}/cmake/layering.cmake
    COMMENT "Checking the includes of ${folder}/ against the layering"
    VERBATIM)
  add_custom_target(${target}_layering DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layering)
  if(DEFINED LOCKSTEP_FORBIDDEN_HEADERS_${folder})
    set(standins ${CMAKE_BINARY_DIR}/layering/forbidden/${tag})
    foreach(header ${LOCKSTEP_FORBIDDEN_HEADERS_${folder}})
      file(WRITE ${standins}/${header}
           "#error \"${folder}/ must not include ${header}, directly or through a header "
           "(cmake/layering.cmake)\"\n")
    endforeach()
    target_include_directories(${target} BEFORE PRIVATE ${standins})
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED FOLDER)
  if(NOT DEFINED LOCKSTEP_ALLOWED_${FOLDER})
    message(FATAL_ERROR "layering: folder '${FOLDER}' has no entry in cmake/layering.cmake")
  endif()
  file(GLOB files ${DIR}/*.h ${DIR}/*.cc ${DIR}/*.capnp)
  set(errors "")
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line ${lines})
      if(line MATCHES "include[ \t]*[\"<]([^\">]+)[\">]")
        set(path "${CMAKE_MATCH_1}")
        list(FIND LOCKSTEP_FORBIDDEN_HEADERS_${FOLDER} "${path}" forbidden)
        if(forbidden GREATER -1)
          string(APPEND errors "\n  ${f}: ${FOLDER}/ must not include ${path}")
        endif()
        _lockstep_include_folder("${path}" folder)
        if(folder)
          list(FIND LOCKSTEP_ALLOWED_${FOLDER} "${folder}" ok)
          if(ok EQUAL -1)
            string(APPEND errors "\n  ${f}: ${FOLDER}/ must not include ${folder}/ (${path})")
          endif()
        endif()
      endif()
    endforeach()
  endforeach()
  if(errors)
    message(FATAL_ERROR "layering violation (${FOLDER}/ may include only: "
                        "${LOCKSTEP_ALLOWED_${FOLDER}}):${errors}")
  endif()
  if(DEFINED STAMP)
    # Ninja makes an output's folder itself; Unix Makefiles does not.
    get_filename_component(stamp_dir ${STAMP} DIRECTORY)
    file(MAKE_DIRECTORY ${stamp_dir})
    file(TOUCH ${STAMP})
  endif()
endif()
