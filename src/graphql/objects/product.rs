//! `Product`: what a practice books or sells (an appointment type is the bookable kind), and
//! the practice's settings that refer to products: `PracticeLocation`, with the services a
//! location provides, and the access groups and number definitions of `Practice`.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::booking::MetadataEntry;
use super::location::Address;
use super::page::{PageInfo, items};
use crate::auth::{Access, Resource};
use crate::graphql::access::require;
use crate::graphql::loaders::{self, load_many};
use crate::graphql::scalars::DateTime;
use crate::store;

/// A product of the practice (see the impl).
pub struct Product(pub store::products::Product);

/// A product of the practice: an appointment type (`productType: "appointment"`, the kind a
/// booking is for, with a duration), a service or an item it sells. Reading products needs
/// `bookings:read`; creating and changing them `settings`.
#[Object]
impl Product {
    /// The product's id; an appointment type's is what BookingDataInput.bookingType takes.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// Its name, unique within the practice, e.g. "Initial consultation".
    async fn name(&self) -> Option<&str> {
        Some(&self.0.name)
    }
    /// "appointment" (bookable, with a duration), "service" or "item"; fixed once made.
    async fn product_type(&self) -> Option<&str> {
        Some(&self.0.product_type)
    }
    /// "active", or "inactive" once no longer offered (kept for the bookings that name it).
    async fn status(&self) -> Option<&str> {
        Some(&self.0.status)
    }
    /// How long it takes, in minutes: an appointment always has one, and a booking without
    /// an end lasts this long.
    async fn duration(&self) -> Option<i32> {
        self.0.duration.and_then(|d| i32::try_from(d).ok())
    }
    /// Its price, in the practice's currency.
    async fn price(&self) -> Option<f64> {
        self.0.price
    }
    /// What it costs the practice, in the practice's currency.
    async fn cost(&self) -> Option<f64> {
        self.0.cost
    }
    /// The practice's own code for it, e.g. a billing code.
    async fn item_code(&self) -> Option<&str> {
        self.0.item_code.as_deref()
    }
    /// Its colour in calendars: a CSS hex colour such as "#0ea5e9".
    async fn color(&self) -> Option<&str> {
        self.0.color.as_deref()
    }
    /// Notes for the practice's staff.
    async fn comments(&self) -> Option<&str> {
        self.0.comments.as_deref()
    }
    /// True when a new booking may be for it: only appointments can be, and only while active
    /// (an inactive type made bookable answers false until it is active again).
    async fn is_bookable(&self) -> Option<bool> {
        Some(self.0.can_be_booked())
    }
    /// True for an appointment held by video.
    async fn is_video_consultation(&self) -> Option<bool> {
        Some(self.0.is_video_consultation != 0)
    }
    /// True when online booking asks for payment up front (taken by the booking widget,
    /// which reports it in Booking.onlineBookingPaymentStatus).
    async fn requires_payment(&self) -> Option<bool> {
        Some(self.0.requires_payment != 0)
    }
    /// True when an online booking waits for the practice to confirm it.
    async fn requires_confirmation(&self) -> Option<bool> {
        Some(self.0.requires_confirmation != 0)
    }
    /// The practice's labels on the product (labels since deleted from the catalogue are
    /// left out).
    async fn labels(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<ProductLabel>>>> {
        let labels = load_many::<loaders::Labels>(ctx, self.0.label_ids()).await?;
        Ok(items(labels, |l| ProductLabel {
            id: ID(l.id.clone()),
            reference_id: ID(l.id),
            text: Some(l.title),
            color: l.color,
        }))
    }
    /// The tax on its price; null when none is set.
    async fn tax(&self) -> Option<Tax> {
        let p = &self.0;
        (p.tax_name.is_some() || p.tax_rate.is_some() || p.tax_code.is_some()).then(|| Tax {
            tax_name: p.tax_name.clone(),
            tax_rate: p.tax_rate.and_then(|r| i32::try_from(r).ok()),
            tax_code: p.tax_code.clone(),
        })
    }
    /// Its metadata entries, in the order they were set (at most 50).
    async fn metadata(&self) -> Option<Vec<Option<MetadataEntry>>> {
        items(self.0.metadata(), |(key, value)| MetadataEntry {
            key,
            value: Some(value),
        })
    }
    /// When it was made (appointment types from before products: when they were).
    async fn created_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.created_at))
    }
    /// When it last changed.
    async fn updated_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.updated_at))
    }
}

/// A label of the practice's catalogue on a product.
#[derive(SimpleObject)]
pub struct ProductLabel {
    /// The label's id (Label.id): a product carries a label once, so this is also its place
    /// on the product.
    pub id: ID,
    /// The id of the label in the practice's catalogue (Label.id), as PatientLabel has it.
    pub reference_id: ID,
    /// The label's title.
    pub text: Option<String>,
    /// The label's colour, e.g. "#e11d48".
    pub color: Option<String>,
}

/// The tax on a product's price.
#[derive(SimpleObject)]
pub struct Tax {
    /// Its name, e.g. "VAT".
    pub tax_name: Option<String>,
    /// Its rate, in whole percent (0 to 100).
    pub tax_rate: Option<i32>,
    /// The practice's code for it, e.g. "T1".
    pub tax_code: Option<String>,
}

/// A page of products.
#[derive(SimpleObject)]
pub struct ProductData {
    /// The products on this page, by name.
    pub data: Option<Vec<Option<Product>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

/// A location of the practice, as `practice` lists it (see the impl).
pub struct PracticeLocation(pub store::locations::Location);

/// A location of the practice, as `practice` lists it: a room or a site, grouped by site, with
/// the appointment types offered there.
#[Object]
impl PracticeLocation {
    /// The location's id: what BookingDataInput.location takes.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// The location's name, unique within the practice, e.g. "Room 2".
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The site it belongs to, e.g. "Main surgery"; a location set up without one is a site of
    /// its own, and this is its name.
    async fn group_name(&self) -> &str {
        self.0.site()
    }
    /// The location's postal address.
    async fn address(&self) -> Option<Address> {
        let l = &self.0;
        Some(Address {
            address: l.address.clone(),
            city: l.city.clone(),
            postcode: l.postcode.clone(),
            country: l.country.clone(),
        })
    }
    /// The appointment types offered here (at most 30), as set with createLocation or
    /// updateLocation. Needs `bookings:read`, as `products` does.
    async fn services_provided(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<Product>>>> {
        require(ctx, Resource::Bookings, Access::Read)?;
        let found = load_many::<loaders::Products>(ctx, self.0.service_ids()).await?;
        Ok(items(found, Product))
    }
}

/// An access group of the practice: staff who are not admins see the patients of their
/// groups, and those in none.
#[derive(SimpleObject)]
pub struct PracticeAccessGroups {
    /// The group's id: what addPatientAccessGroup and UpdateUserInput.accessGroupIds take.
    pub id: ID,
    /// Its name, unique within the practice, e.g. "mental-health".
    pub name: String,
    /// What people read, e.g. "Mental health team".
    pub label: String,
}

impl From<store::catalogue::AccessGroup> for PracticeAccessGroups {
    fn from(g: store::catalogue::AccessGroup) -> Self {
        PracticeAccessGroups {
            id: ID(g.id),
            name: g.name,
            label: g.label,
        }
    }
}

/// A number the practice records of its patients, e.g. "NHS number": Patient.numbers holds a
/// patient's values.
#[derive(SimpleObject)]
pub struct PracticeNumbers {
    /// The definition's id: what AddPatientNumberData.numberId takes.
    pub id: ID,
    /// Its name, unique within the practice.
    pub name: String,
    /// True for the practice's main number; at most one is.
    pub primary: bool,
    /// True once the practice stopped recording it: patients' values keep its name.
    pub deleted: bool,
}

impl From<store::catalogue::NumberDefinition> for PracticeNumbers {
    fn from(n: store::catalogue::NumberDefinition) -> Self {
        PracticeNumbers {
            id: ID(n.id),
            name: n.name,
            primary: n.is_primary != 0,
            deleted: n.deleted_at.is_some(),
        }
    }
}
