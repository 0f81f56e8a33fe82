-- When the patient was last archived, kept when they are brought back: archived_at is the
-- archive in force (null once unarchived), and PatientArchivedInfo.archivedAt tells when the
-- last archive began, beside its reason, its comments and who made it, which stay too.
ALTER TABLE patients ADD COLUMN last_archived_at INTEGER;
UPDATE patients SET last_archived_at = archived_at WHERE archived_at IS NOT NULL;
-- A patient brought back before this migration: the time of its last archive, as the audit
-- log recorded it (through its index by patient).
UPDATE patients SET last_archived_at = (
    SELECT MAX(a.at) FROM audit_events a
    WHERE a.practice_id = patients.practice_id AND a.patient_id = patients.id
      AND a.resource_type = 'patient' AND a.action = 'archive'
)
WHERE archived_at IS NULL AND unarchived_at IS NOT NULL;
