//! The permission model: what a token or a signed-in staff user may do.
//!
//! | permission | grants |
//! |---|---|
//! | `*` | everything |
//! | `patients:read`, `patients:write` (likewise `bookings:`, `labels:`, `users:`) | a resource; write implies read |
//! | `webhooks:read`, `webhooks:write` | webhook subscriptions and their deliveries |
//! | `settings` | tokens, the audit log, webhooks |
//! | `query:patient`, `mutation:addPatientLabel`, ... | one root operation, and what it returns of its own resource |

use std::fmt;
use std::str::FromStr;

/// A kind of record that permissions are granted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    Patients,
    Bookings,
    Labels,
    Users,
    /// Webhook subscriptions and their deliveries; `settings` grants both reading and writing.
    Webhooks,
}

impl Resource {
    pub const ALL: [Resource; 5] = [
        Resource::Patients,
        Resource::Bookings,
        Resource::Labels,
        Resource::Users,
        Resource::Webhooks,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Patients => "patients",
            Resource::Bookings => "bookings",
            Resource::Labels => "labels",
            Resource::Users => "users",
            Resource::Webhooks => "webhooks",
        }
    }
}

/// Reading or writing a resource. Write implies read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// The three kinds of GraphQL root operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperationKind {
    Query,
    Mutation,
    Subscription,
}

impl OperationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Query => "query",
            OperationKind::Mutation => "mutation",
            OperationKind::Subscription => "subscription",
        }
    }
}

/// One permission, as written in a token's list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// `*`: everything.
    All,
    /// `patients:read`, `bookings:write`, ...
    Resource(Resource, Access),
    /// `settings`: tokens and the audit log.
    Settings,
    /// `query:patient`: one root operation, by its field name.
    Operation(OperationKind, String),
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Permission::All => f.write_str("*"),
            Permission::Resource(r, a) => write!(f, "{}:{}", r.as_str(), a.as_str()),
            Permission::Settings => f.write_str("settings"),
            Permission::Operation(k, name) => write!(f, "{}:{}", k.as_str(), name),
        }
    }
}

impl FromStr for Permission {
    type Err = String;

    /// Parses a permission string. Operation names are checked for shape here; whether the
    /// operation exists is the schema's to say.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unknown = || {
            format!(
                "unknown permission {text:?}: use *, settings, RESOURCE:read or RESOURCE:write \
                 (RESOURCE is patients, bookings, labels, users or webhooks), or query:FIELD, \
                 mutation:FIELD, subscription:FIELD"
            )
        };
        match text {
            "*" => return Ok(Permission::All),
            "settings" => return Ok(Permission::Settings),
            _ => {}
        }
        let (head, tail) = text.split_once(':').ok_or_else(unknown)?;
        if let Some(resource) = Resource::ALL.into_iter().find(|r| r.as_str() == head) {
            let access = match tail {
                "read" => Access::Read,
                "write" => Access::Write,
                _ => return Err(unknown()),
            };
            return Ok(Permission::Resource(resource, access));
        }
        let kind = match head {
            "query" => OperationKind::Query,
            "mutation" => OperationKind::Mutation,
            "subscription" => OperationKind::Subscription,
            _ => return Err(unknown()),
        };
        let is_name = tail.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && tail.len() <= 64
            && tail.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_name {
            return Err(unknown());
        }
        Ok(Permission::Operation(kind, tail.to_string()))
    }
}

/// A set of permissions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions(Vec<Permission>);

impl Permissions {
    pub fn new(list: Vec<Permission>) -> Permissions {
        let mut list = list;
        list.dedup();
        Permissions(list)
    }

    /// Parses a list of permission strings, failing on the first unknown one.
    pub fn parse<S: AsRef<str>>(list: &[S]) -> Result<Permissions, String> {
        list.iter()
            .map(|s| s.as_ref().parse())
            .collect::<Result<Vec<_>, _>>()
            .map(Permissions::new)
    }

    /// The permissions in the order they were given.
    pub fn iter(&self) -> impl Iterator<Item = &Permission> {
        self.0.iter()
    }

    /// May read (or write) every record of `resource`.
    pub fn allows(&self, resource: Resource, access: Access) -> bool {
        self.0.iter().any(|p| match p {
            Permission::All => true,
            Permission::Resource(r, a) => *r == resource && (*a == access || *a == Access::Write),
            Permission::Settings => resource == Resource::Webhooks,
            _ => false,
        })
    }

    /// May manage tokens and read the audit log.
    pub fn allows_settings(&self) -> bool {
        self.0
            .iter()
            .any(|p| matches!(p, Permission::All | Permission::Settings))
    }

    /// Holds `query:NAME` (or the like) for this operation.
    pub fn allows_operation(&self, kind: OperationKind, name: &str) -> bool {
        self.0.iter().any(|p| match p {
            Permission::All => true,
            Permission::Operation(k, n) => *k == kind && n == name,
            _ => false,
        })
    }

    /// True if everything `permission` grants is granted by this set too: a token may hand
    /// on only what it holds.
    pub fn covers(&self, permission: &Permission) -> bool {
        match permission {
            Permission::All => self.0.contains(&Permission::All),
            Permission::Settings => self.allows_settings(),
            Permission::Resource(r, a) => self.allows(*r, *a),
            Permission::Operation(k, n) => self.allows_operation(*k, n),
        }
    }
}

/// The role of a staff user, which decides what a signed-in user may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Admin,
    Practitioner,
    Receptionist,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Admin, Role::Practitioner, Role::Receptionist];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Practitioner => "practitioner",
            Role::Receptionist => "receptionist",
        }
    }

    /// What staff of this role may do.
    pub fn permissions(self) -> Permissions {
        use Access::{Read, Write};
        use Resource::{Bookings, Labels, Patients, Users};
        let grants: &[(Resource, Access)] = match self {
            Role::Admin => return Permissions::new(vec![Permission::All]),
            Role::Practitioner => &[
                (Patients, Write),
                (Bookings, Write),
                (Labels, Write),
                (Users, Read),
            ],
            Role::Receptionist => &[
                (Bookings, Write),
                (Patients, Read),
                (Labels, Read),
                (Users, Read),
            ],
        };
        Permissions::new(
            grants
                .iter()
                .map(|(r, a)| Permission::Resource(*r, *a))
                .collect(),
        )
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| {
                format!("unknown role {text:?}: use admin, practitioner or receptionist")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perms(list: &[&str]) -> Permissions {
        Permissions::parse(list).expect("valid permissions")
    }

    #[test]
    fn parses_and_prints_every_form() {
        for text in [
            "*",
            "settings",
            "patients:read",
            "bookings:write",
            "query:patient",
            "mutation:addPatientLabel",
        ] {
            let p: Permission = text.parse().expect(text);
            assert_eq!(p.to_string(), text);
        }
        for bad in [
            "",
            "patients",
            "patients:delete",
            "query:",
            "query:a b",
            "admin",
        ] {
            assert!(bad.parse::<Permission>().is_err(), "{bad}");
        }
    }

    #[test]
    fn write_implies_read_not_the_reverse() {
        let p = perms(&["patients:write", "bookings:read"]);
        assert!(p.allows(Resource::Patients, Access::Read));
        assert!(p.allows(Resource::Bookings, Access::Read));
        assert!(!p.allows(Resource::Bookings, Access::Write));
        assert!(!p.allows(Resource::Labels, Access::Read));
        assert!(!p.allows_settings());
    }

    #[test]
    fn settings_implies_webhooks() {
        let p = perms(&["settings"]);
        assert!(p.allows(Resource::Webhooks, Access::Write));
        assert!(!p.allows(Resource::Patients, Access::Read));
        let p = perms(&["webhooks:read"]);
        assert!(p.allows(Resource::Webhooks, Access::Read));
        assert!(!p.allows(Resource::Webhooks, Access::Write));
        assert!(!p.allows_settings());
    }

    #[test]
    fn operation_permission_grants_only_that_operation() {
        let p = perms(&["query:patient"]);
        assert!(p.allows_operation(OperationKind::Query, "patient"));
        assert!(!p.allows_operation(OperationKind::Query, "patients"));
        assert!(!p.allows(Resource::Patients, Access::Read));
    }

    #[test]
    fn roles_match_the_contract() {
        let admin = Role::Admin.permissions();
        assert!(admin.allows_settings());
        let practitioner = Role::Practitioner.permissions();
        assert!(practitioner.allows(Resource::Patients, Access::Write));
        assert!(!practitioner.allows(Resource::Users, Access::Write));
        assert!(!practitioner.allows_settings());
        let receptionist = Role::Receptionist.permissions();
        assert!(receptionist.allows(Resource::Bookings, Access::Write));
        assert!(receptionist.allows(Resource::Patients, Access::Read));
        assert!(!receptionist.allows(Resource::Patients, Access::Write));
        assert!(!receptionist.allows(Resource::Labels, Access::Write));
    }

    #[test]
    fn covers_only_what_is_held() {
        let p = perms(&["patients:write", "settings"]);
        assert!(p.covers(&"patients:read".parse().expect("p")));
        assert!(p.covers(&"settings".parse().expect("p")));
        assert!(!p.covers(&"*".parse().expect("p")));
        assert!(!p.covers(&"bookings:read".parse().expect("p")));
        assert!(perms(&["*"]).covers(&"*".parse().expect("p")));
    }
}
