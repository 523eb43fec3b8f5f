// Declarations only (see CFuzzDriver.h).
#include "CFuzzDriver.h"
