# cmake -DDIR=<wire source dir> -DSTAMP=<stamp file> -P check_layering.cmake
# wire/ may use base/ but never engine/ (the numeric core).
file(GLOB files ${DIR}/*.h ${DIR}/*.cc ${DIR}/*.capnp)
foreach(f ${files})
  file(STRINGS ${f} hits REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]engine/")
  if(hits)
    message(FATAL_ERROR "${f}: wire/ must not include engine/: ${hits}")
  endif()
endforeach()
file(TOUCH ${STAMP})
