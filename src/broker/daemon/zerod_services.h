// What zerod is made of, as services with declared lifetimes
// (service_graph.h): each one's name, what it needs, what it is. The order
// of the list is only the tie-break; what a service needs is what makes it
// start after and stop before another. zerod.cpp binds each to its start
// and stop; docs/HACKING.md shows the graph (a test holds the two equal).
#pragma once

#include <vector>

#include "broker/daemon/service_graph.h"

namespace zn::broker {

std::vector<ServiceDeclaration> zerod_services();

}  // namespace zn::broker
