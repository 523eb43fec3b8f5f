#ifndef CAVCODEC_SHIM_H
#define CAVCODEC_SHIM_H
#include <libavcodec/avcodec.h>
#include <libavutil/pixdesc.h>
#endif
