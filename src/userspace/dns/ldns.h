// Include ldns through here: without a prior <stdbool.h>, ldns/common.h
// #defines bool, true and false in C++, which breaks later standard headers.
#pragma once

#include <stdbool.h>  // defines __bool_true_false_are_defined

#include <ldns/ldns.h>
