//! Where bookings take place and what they are for: `Location`, `Appointment`, and the
//! `Address` that locations and patients share.

use async_graphql::{ID, SimpleObject};

use crate::store::locations::Location as StoredLocation;
use crate::store::products::Product;

/// The patient's postal address.
#[derive(SimpleObject, Clone, Debug)]
pub struct Address {
    /// Street and number.
    pub address: Option<String>,
    /// Town or city.
    pub city: Option<String>,
    /// Postal code.
    pub postcode: Option<String>,
    /// Country.
    pub country: Option<String>,
}

/// A place where the practice sees patients.
#[derive(SimpleObject, Clone)]
pub struct Location {
    /// The location's id: what BookingDataInput.location takes.
    pub id: ID,
    /// The location's name, unique within the practice, e.g. "Main surgery".
    pub name: Option<String>,
    /// The location's postal address.
    pub address: Option<Address>,
}

impl From<StoredLocation> for Location {
    fn from(l: StoredLocation) -> Self {
        Location {
            id: ID(l.id),
            name: Some(l.name),
            address: Some(Address {
                address: l.address,
                city: l.city,
                postcode: l.postcode,
                country: l.country,
            }),
        }
    }
}

/// A kind of booking: what it is for, how long it takes and what it costs. It is the
/// appointment product of the same id (see Product), as the API this one follows names it.
#[derive(SimpleObject, Clone)]
pub struct Appointment {
    /// The appointment type's id: what BookingDataInput.bookingType takes.
    pub id: ID,
    /// Its title, unique within the practice, e.g. "Initial consultation".
    pub title: Option<String>,
    /// How long it takes, in minutes; a booking without an end lasts this long.
    pub duration: Option<i32>,
    /// Its price, in the practice's currency.
    pub price: Option<f64>,
}

impl From<Product> for Appointment {
    fn from(t: Product) -> Self {
        Appointment {
            id: ID(t.id),
            title: Some(t.name),
            duration: t.duration.and_then(|d| i32::try_from(d).ok()),
            price: t.price,
        }
    }
}
