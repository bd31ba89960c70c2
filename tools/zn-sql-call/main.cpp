// zn-sql-call: runs one SQL capability call in a process of its own (issue
// 30), for zerod's SqlStore (src/broker/resources/sql_store.h): the request
// on stdin, the reply on stdout, bounded and killed at its deadline there.
#include "broker/resources/sql_call.h"

int main() { return zn::broker::sql_call_main(0, 1); }
