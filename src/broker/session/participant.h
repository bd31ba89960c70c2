// A part of zerod that keeps something of each session outside the
// session's own state (session_state.h): what is found by another key than
// the session (a ticket, a grant, a listener port, a VM, a capability's
// store rows) or lives in another service (the audit's secrets). Each is
// told by the registry when a session comes, changes and goes, so that
// create, update and delete are one call each (SessionRegistry), whoever
// makes them (the control socket, a restart's restore), and no part can be
// forgotten by one caller.
//
// Participants join before the registry restores (zerod's services graph,
// docs/HACKING.md); they are told in the order they joined when a session
// comes or changes, in the reverse order when it goes. The hooks marked
// "under the registry's control lock" are serialised with every other
// change, so a session re-created under a deleted one's id never races its
// predecessor's removal; they must not call back into the registry's
// changes. Hooks must not throw (a failure is theirs to report).
#pragma once

#include "broker/session/session.h"

namespace zn::broker {

class SessionParticipant {
 public:
  virtual ~SessionParticipant() = default;

  // A created, restored or updated session, before the data path can find
  // it (`before`: the snapshot it replaces, null for a new one): what must
  // hold from its first packet on. Under the registry's control lock.
  virtual void session_publishing(const Session* /*before*/, const Session& /*next*/) {}
  // The same, once it is published and persisted. Under the control lock.
  virtual void session_published(const Session* /*before*/, const Session& /*now*/) {}
  // A session about to be deleted, still found by the data path: what must
  // go before its device does (a VM, an ingress listener). Not under the
  // control lock (it may wait for a process); may run for a delete that
  // then finds the session already gone.
  virtual void session_leaving(const Session& /*s*/) {}
  // A session the data path no longer finds (deleted, or a create undone).
  // Under the control lock.
  virtual void session_removed(const Session& /*s*/) {}
};

}  // namespace zn::broker
