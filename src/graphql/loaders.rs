//! Batch loading: every record a response reaches through a relation (a booking's patient,
//! doctor, location; a patient's labels) is fetched with one statement per kind, however many
//! records the response holds.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};
use async_graphql::{Context, Result};

use super::error::{store_failed, store_failed_ref};
use crate::auth::Principal;
use crate::store::{PracticeStore, Store, StoreResult};

/// One kind of record loaded by id.
pub trait Batch: Sized + Send + Sync + 'static {
    type Value: Clone + Send + Sync + 'static;

    /// Where a request's [`Loaders`] keep the loader of this kind.
    fn slot(loaders: &Loaders) -> &OnceLock<Loaded<Self>>;

    fn load<'a>(
        store: PracticeStore<'a>,
        ids: &'a [String],
    ) -> impl Future<Output = StoreResult<HashMap<String, Self::Value>>> + Send + 'a;
}

/// Loads records of kind `B` of one practice, in batches.
pub struct ByIds<B> {
    store: Store,
    practice_id: String,
    /// The caller's access groups, when they see only those patients.
    patient_groups: Option<Vec<String>>,
    kind: PhantomData<fn() -> B>,
}

impl<B: Batch> Loader<String> for ByIds<B> {
    type Value = B::Value;
    type Error = Arc<crate::store::StoreError>;

    async fn load(&self, keys: &[String]) -> Result<HashMap<String, Self::Value>, Self::Error> {
        let practice = self
            .store
            .practice(&self.practice_id)
            .seen_by(self.patient_groups.as_deref());
        B::load(practice, keys).await.map_err(Arc::new)
    }
}

/// The loader of kind `B` as a request holds it.
type Loaded<B> = DataLoader<ByIds<B>, HashMapCache>;

/// The loaders of one request, each made when a field first asks for it: most requests (a
/// patient, a page without relations) ask for none or one, and the seven kinds made ahead for
/// every request cost about as much as reading its document's cost.
pub struct Loaders {
    store: Store,
    practice_id: String,
    /// The caller's access groups, when they see only those patients.
    patient_groups: Option<Vec<String>>,
    /// Whether a record loaded once is kept for the rest of the request (see [`install`]).
    cached: bool,
    made: Made,
    definitions: Definitions,
}

/// The practice's definitions that a patient's record names (its number definitions, its
/// access groups): read whole, once a request, when a field first asks. A page of patients
/// with their numbers asks once, not once a patient, and a practice holds at most 50 and
/// 100 of them.
#[derive(Default)]
struct Definitions {
    numbers: tokio::sync::OnceCell<Arc<HashMap<String, String>>>,
    groups: tokio::sync::OnceCell<Arc<HashMap<String, (String, String)>>>,
}

/// The loaders a request has made so far, one a kind.
#[derive(Default)]
struct Made {
    patients: OnceLock<Loaded<Patients>>,
    patient_labels: OnceLock<Loaded<PatientLabels>>,
    users: OnceLock<Loaded<Users>>,
    locations: OnceLock<Loaded<Locations>>,
    products: OnceLock<Loaded<Products>>,
    bookings: OnceLock<Loaded<Bookings>>,
    labels: OnceLock<Loaded<Labels>>,
}

impl Loaders {
    /// The request's loader of kind `B`, made now if no field asked for it before.
    fn of<B: Batch>(&self) -> &Loaded<B> {
        B::slot(self).get_or_init(|| {
            let loader = DataLoader::with_cache(
                ByIds::<B> {
                    store: self.store.clone(),
                    practice_id: self.practice_id.clone(),
                    patient_groups: self.patient_groups.clone(),
                    kind: PhantomData,
                },
                tokio::spawn,
                HashMapCache::default(),
            )
            // No wait for more keys: a list loads its relations ahead in one batch
            // ([`prime`]), and the loader's default of 1 ms would be most of a small query's
            // time.
            .delay(Duration::ZERO);
            loader.enable_all_cache(self.cached);
            loader
        })
    }
}

/// The request's loader of kind `B`.
fn loader<'c, B: Batch>(ctx: &Context<'c>) -> Result<&'c Loaded<B>> {
    Ok(ctx.data::<Loaders>()?.of::<B>())
}

/// Loads one record of kind `B` through the request's loader.
pub async fn load_one<B: Batch>(ctx: &Context<'_>, id: &str) -> Result<Option<B::Value>> {
    loader::<B>(ctx)?
        .load_one(id.to_string())
        .await
        .map_err(|e| store_failed_ref(&e))
}

/// Gives the request's loader of kind `B` a record fetched by other means (with the row it
/// hangs from, say), so that a field that asks for it is not sent to the database again.
/// Without the cache (a mutation's request), the field loads it as usual.
pub async fn feed<B: Batch>(ctx: &Context<'_>, id: String, value: B::Value) -> Result<()> {
    loader::<B>(ctx)?.feed_one(id, value).await;
    Ok(())
}

/// Loads the records of kind `B` with these ids through the request's loader, in the order
/// of `ids`; an id with no record is left out.
pub async fn load_many<B: Batch>(ctx: &Context<'_>, ids: Vec<String>) -> Result<Vec<B::Value>> {
    let mut found = loader::<B>(ctx)?
        .load_many(ids.clone())
        .await
        .map_err(|e| store_failed_ref(&e))?;
    Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
}

/// Loads every record of kind `B` a page will ask for, in one statement, ahead of its fields.
/// Without this, the fields of a long page reach the loader over a few milliseconds and may
/// be split into several batches; with it the number of statements is fixed.
pub async fn prime<B: Batch>(ctx: &Context<'_>, ids: Vec<String>) -> Result<()> {
    loader::<B>(ctx)?
        .load_many(ids)
        .await
        .map(|_| ())
        .map_err(|e| store_failed_ref(&e))
}

/// Reads a practice's definitions once a request (each time in a mutation's request, which
/// reads what its own earlier fields wrote): `read` is given the store and the practice's id.
async fn definitions<T, F>(
    ctx: &Context<'_>,
    slot: impl FnOnce(&Definitions) -> &tokio::sync::OnceCell<Arc<T>>,
    read: impl FnOnce(Store, String) -> F,
) -> Result<Arc<T>>
where
    F: Future<Output = StoreResult<T>>,
{
    let loaders = ctx.data::<Loaders>()?;
    let reading = read(loaders.store.clone(), loaders.practice_id.clone());
    if !loaders.cached {
        return reading.await.map(Arc::new).map_err(store_failed);
    }
    slot(&loaders.definitions)
        .get_or_try_init(|| async { reading.await.map(Arc::new) })
        .await
        .cloned()
        .map_err(store_failed)
}

/// The names of the practice's number definitions, by id.
pub async fn number_names(ctx: &Context<'_>) -> Result<Arc<HashMap<String, String>>> {
    definitions(
        ctx,
        |d| &d.numbers,
        |store, practice| async move {
            let found = store.practice(&practice).list_number_definitions().await?;
            Ok(found.into_iter().map(|d| (d.id, d.name)).collect())
        },
    )
    .await
}

/// The names and labels of the practice's access groups, by id.
pub async fn access_group_names(
    ctx: &Context<'_>,
) -> Result<Arc<HashMap<String, (String, String)>>> {
    definitions(
        ctx,
        |d| &d.groups,
        |store, practice| async move {
            let found = store.practice(&practice).list_access_groups().await?;
            Ok(found
                .into_iter()
                .map(|g| (g.id, (g.name, g.label)))
                .collect())
        },
    )
    .await
}

/// Declares a batch kind that calls one store method.
macro_rules! batch {
    ($(#[$doc:meta])* $name:ident, $value:ty, $method:ident, $slot:ident) => {
        $(#[$doc])*
        pub struct $name;

        impl Batch for $name {
            type Value = $value;

            fn slot(loaders: &Loaders) -> &OnceLock<Loaded<Self>> {
                &loaders.made.$slot
            }

            fn load<'a>(
                store: PracticeStore<'a>,
                ids: &'a [String],
            ) -> impl Future<Output = StoreResult<HashMap<String, Self::Value>>> + Send + 'a {
                async move { store.$method(ids).await }
            }
        }
    };
}

batch!(
    /// Patients by id.
    Patients, crate::store::patients::Patient, patients_by_ids, patients
);
batch!(
    /// The labels on each patient, by patient id.
    PatientLabels, Vec<crate::store::patients::PatientLabel>, labels_of_patients, patient_labels
);
batch!(
    /// Staff users by id.
    Users, crate::store::users::User, users_by_ids, users
);
batch!(
    /// Locations by id.
    Locations, crate::store::locations::Location, locations_by_ids, locations
);
batch!(
    /// Products (appointment types among them) by id.
    Products, crate::store::products::Product, products_by_ids, products
);

batch!(
    /// Bookings by id.
    Bookings, crate::store::bookings::Booking, bookings_by_ids, bookings
);
batch!(
    /// Labels of the catalogue by id.
    Labels, crate::store::labels::Label, labels_by_ids, labels
);

/// Adds the loaders of every kind to a request of `caller`, who sees what its practice and
/// access groups let it; each is made when a field first asks for it. With `cached`, a record
/// loaded once is not loaded again in the same request, which lets a list fetch its relations
/// ahead ([`prime`]); a mutation's request does not cache, so that it reads what its own
/// earlier fields wrote.
pub fn install(
    request: async_graphql::Request,
    store: &Store,
    caller: &Principal,
    cached: bool,
) -> async_graphql::Request {
    request.data(Loaders {
        store: store.clone(),
        practice_id: caller.practice_id.clone(),
        patient_groups: caller.patient_groups.clone(),
        cached,
        made: Made::default(),
        definitions: Definitions::default(),
    })
}
