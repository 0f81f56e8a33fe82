-- What the retention sweep has deleted of each practice's events, type by type: a cursor
-- before the floor of a type has missed events of that type. A subscriber to rare events
-- (patient.deleted) that resumes after the last one it saw, a week ago, has missed nothing
-- when the events swept since were of other types. The practice's floor, past which every
-- event of the practice is gone, is the highest of its types': event_floors, which kept it
-- apart, goes.
CREATE TABLE event_type_floors (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    event_type   TEXT    NOT NULL,
    tx_id        BIGINT  NOT NULL,
    id           BIGINT  NOT NULL,
    PRIMARY KEY (practice_id, event_type)
);
-- What was swept before this migration is not known by type: every type there was then
-- starts at the practice's floor (a type added later has no event before it).
WITH types (event_type) AS (VALUES
    ('patient.created'),
    ('patient.updated'),
    ('patient.deleted'),
    ('patient.archived'),
    ('patient.unarchived'),
    ('patient.label.added'),
    ('patient.label.removed'),
    ('patient.phone.added'),
    ('patient.phone.updated'),
    ('patient.phone.removed'),
    ('patient.number.added'),
    ('patient.number.updated'),
    ('patient.number.removed'),
    ('patient.customAttribute.added'),
    ('patient.customAttribute.updated'),
    ('patient.customAttribute.removed'),
    ('patient.relationship.added'),
    ('patient.relationship.updated'),
    ('patient.relationship.removed'),
    ('patient.membership.updated'),
    ('booking.created'),
    ('booking.updated'),
    ('booking.deleted'),
    ('booking.patientJourney.arrived'),
    ('booking.patientJourney.inConsultation'),
    ('booking.patientJourney.completed'),
    ('booking.patientJourney.noShow'),
    ('label.created'),
    ('label.updated'),
    ('label.deleted'),
    ('product.created'),
    ('product.updated'),
    ('location.created'),
    ('location.updated'),
    ('accessGroup.created'),
    ('practiceNumber.created'),
    ('token.revoked'),
    ('user.changed')
)
INSERT INTO event_type_floors (practice_id, event_type, tx_id, id)
SELECT f.practice_id, t.event_type, f.tx_id, f.id FROM event_floors f CROSS JOIN types t;
DROP TABLE event_floors;
